import { DeclarationError } from './errors.js';

/** `value` as a whole number of at least 1, or a `DeclarationError` saying where and what came instead. */
export function positiveInteger(value: unknown, name: string, where: string): number {
  if (typeof value !== 'number' || !Number.isInteger(value) || value < 1) {
    throw new DeclarationError(`${where}: ${name} must be a whole number of at least 1, got ${String(value)}`);
  }
  return value;
}

/** `value` as a number of milliseconds above 0, or a `DeclarationError` saying where and what came instead. */
export function positiveNumber(value: unknown, name: string, where: string): number {
  if (typeof value !== 'number' || !Number.isFinite(value) || value <= 0) {
    throw new DeclarationError(`${where}: ${name} must be a number of milliseconds above 0, got ${String(value)}`);
  }
  return value;
}
