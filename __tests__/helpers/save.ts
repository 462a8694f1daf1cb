/** Saving a model into memory, as `model.save(tf.io.withSaveHandler(...))` does. */
import * as tf from '@tensorflow/tfjs';

export async function saveToMemory(model: tf.LayersModel): Promise<tf.io.ModelArtifacts> {
  let saved: tf.io.ModelArtifacts | null = null;
  await model.save(
    tf.io.withSaveHandler(async (a) => {
      saved = a;
      return {modelArtifactsInfo: {dateSaved: new Date(), modelTopologyType: 'JSON'}};
    }),
  );
  return saved as unknown as tf.io.ModelArtifacts;
}
