// The first byte a caller may use in the memory a module imports; both modules export it.

/** First free byte after the module's static data, 16-aligned. */
export function heapBase(): usize {
  return (__heap_base + 15) & ~(<usize>15);
}
