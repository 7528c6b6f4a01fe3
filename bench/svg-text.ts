/** What the benchmark charts (docs/*.svg) share: the font, and text placed and escaped. */
const SVG_FONT = 'font-family="system-ui, -apple-system, Segoe UI, sans-serif"';

export interface SvgTextStyle {
  readonly size: number;
  readonly weight?: 'bold';
  readonly anchor?: 'start' | 'middle' | 'end';
  readonly fill?: string;
}

export function svgText(x: number, y: number, content: string, style: SvgTextStyle): string {
  const attributes = [
    `x="${x.toFixed(1)}"`,
    `y="${y.toFixed(1)}"`,
    `font-size="${style.size}"`,
    ...(style.weight ? [`font-weight="${style.weight}"`] : []),
    ...(style.anchor && style.anchor !== 'start' ? [`text-anchor="${style.anchor}"`] : []),
    `fill="${style.fill ?? '#111827'}"`,
  ];
  return `<text ${attributes.join(' ')}>${escapeXml(content)}</text>`;
}

export function escapeXml(value: string): string {
  return value.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;');
}

/** A chart's whole document: `width` by `height` on white, holding `parts`. */
export function svgDocument(width: number, height: number, parts: readonly string[]): string {
  return [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" viewBox="0 0 ${width} ${height}" ${SVG_FONT}>`,
    `<rect width="${width}" height="${height}" fill="#ffffff"/>`,
    ...parts,
    '</svg>',
    '',
  ].join('\n');
}
