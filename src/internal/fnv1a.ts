/**
 * 32-bit FNV-1a over the text's UTF-8 bytes: tiny, the same on every platform, in every process
 * and every run (which a per-process random seed, as in Map hashing, would not give), and needs
 * no crypto module.
 */
export function fnv1a32(text: string): number {
  let hash = 0x811c9dc5;
  for (const byte of new TextEncoder().encode(text)) hash = Math.imul(hash ^ byte, 0x01000193) >>> 0;
  return hash;
}
