/**
 * The last step of loading a keras-hub preset (keras_hub_preset.ts): its tokenizer, of the class
 * tokenizer.json names, with the assets that class declares read through the preset's own source
 * (the one its configs and weights come from), under the preset's rules.
 */
import type {JsonObject} from '../layers/engine/contract';
import type {Tokenizer} from '../tokenizers/tokenizer';
import type {TokenizerSplit} from '../tokenizers/byte_pair';
import {inFiles} from './keras_file';
import {failPreset, PresetFiles} from './keras_hub_sources';
import {
  DEFAULT_MAX_TOKENIZER_FILE_BYTES,
  presetTokenizerClass,
  presetTokenizerClasses,
  readDeclaredAssets,
  tokenizerAssetFolder,
  tokenizerFromPreset,
  utf8Text,
} from './load_tokenizer';

type Obj = JsonObject;

/**
 * The tokenizer of a serialized tokenizer whose assets are in `folder` of `files`: the assets its
 * class declares, read through the preset's own source (the one its configs and weights come from).
 */
export async function tokenizerOf(
  json: Obj,
  files: PresetFiles,
  folder: string,
  split?: TokenizerSplit,
): Promise<Tokenizer> {
  const cls = json.class_name as string;
  const tokenizerClass = presetTokenizerClass(cls);
  if (tokenizerClass == null) {
    failPreset(
      `the tokenizer class ${JSON.stringify(cls)} is not implemented (expected one of ` +
        `${presetTokenizerClasses()
          .map((c) => c.className)
          .join(', ')})`,
    );
  }
  const readBytes = async (path: string): Promise<Uint8Array> => {
    if (!(await files.has(path))) {
      failPreset(`${cls} needs the asset ${path}, which is missing from ${files.label}`);
    }
    return files.read(path, DEFAULT_MAX_TOKENIZER_FILE_BYTES);
  };
  const readText = async (path: string): Promise<string> =>
    utf8Text(await readBytes(path)) ??
    failPreset(`${inFiles(files.label, path)} is not valid UTF-8`);
  const assets = await readDeclaredAssets(tokenizerClass, folder, readText, readBytes);
  try {
    return tokenizerFromPreset(json, assets, {split});
  } catch (e) {
    // the assets' errors, named by their place in the preset
    return failPreset(
      `${inFiles(files.label, folder)}: ${(e as Error).message.replace(/^loadTokenizer: /, '')}`,
    );
  }
}

/** The assets folder of a tokenizer in a preset: `assets/<config_file stem>`. */
export function presetAssetFolder(tokenizer: Obj): string {
  const config = tokenizer.config as Obj;
  return (
    tokenizerAssetFolder(config) ??
    failPreset(
      `expected the tokenizer's config_file to be a plain file name, received ` +
        `${JSON.stringify(config.config_file)}`,
    )
  );
}
