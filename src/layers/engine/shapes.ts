/** Static shapes as tfjs-layers passes them to `build` and `computeOutputShape`. */
export type Shape = Array<number | null>;

/** True for a list of shapes (`[[2, 3], [2, 4]]`), false for one shape (`[2, 3]`). */
export function isShapeList(shape: Shape | Shape[]): shape is Shape[] {
  return shape.length > 0 && Array.isArray(shape[0]);
}

/** The one shape of a single-input layer. */
export function singleShape(shape: Shape | Shape[], layerName: string): Shape {
  if (!isShapeList(shape)) {
    return shape;
  }
  if (shape.length !== 1) {
    throw new Error(`Layer '${layerName}' expects one input, received ${shape.length}`);
  }
  return shape[0];
}

export function formatShape(shape: ReadonlyArray<number | null>): string {
  return `[${shape.map((d) => (d == null ? 'null' : String(d))).join(', ')}]`;
}
