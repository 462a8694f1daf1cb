// Silences tfjs's "install the node backend" banner in test output.
import * as tf from '@tensorflow/tfjs';

tf.env().set('IS_TEST', true);
