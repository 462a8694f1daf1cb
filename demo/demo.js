// The demo page: the committed models (models/*) loaded with tf.loadLayersModel, run on the input
// as it is typed, with the prediction and the attention weights of every head of the model's
// attention layers drawn with tfAttention.attentionHeatmapSvg. Results are read only
// asynchronously (array()), never with dataSync / arraySync: tfjs-backend-webgpu's synchronous
// read is unreliable.
//
// For the browser test (browser/__tests__/demo.test.ts), #result carries data-state (loading,
// running, done, error), and, once a result is shown, data-model, data-input and data-backend.
//
// "Your own Keras model" (#keras): a dropped or picked .keras / .h5 file is read with
// tfAttention.loadKerasModel and a progress bar (onProgress), and its summary shown; a folder is
// a keras-hub preset, read with tfAttention.loadKerasHubPreset, or a .keras / .h5 file with its tokenizer (tokenizer.json and
// assets/tokenizer/, as save_to_preset writes them; preprocessor.json if there). A causal LM with
// a tokenizer gets a prompt box whose text streams as it is generated (generateText's onToken),
// and a line (#lm-step, data-compiled) saying which step ran (generateText's onCompile report).
// #keras carries data-state (idle, loading, loaded, generating, generated, error) for
// browser/__tests__/demo_keras.test.ts.
//
// "Fine-tune on your text" (#ft, under the prompt box of a causal LM): the pasted text, cut into
// examples (paragraphs; a long one cut to the sequence length), trains LoRA adapters with
// tfAttention.finetune (rank, steps, batch size, learning rate from the inputs). Start queues the
// run; while it runs the button is Stop, which aborts it between steps (an AbortSignal). The
// awaited onProgress sets the progress bar, the status (loss, tokens/s, time left) and the loss
// curve (an inline SVG, one circle.point per step with data-step and data-loss); finetune yields
// to the event loop after it, so the page stays responsive. Bad input (an empty text, fewer
// examples than the batch size, a bad number) says what was expected and what arrived. Then the
// prompt box generates from the adapted model. #ft carries data-state (idle, training, trained,
// stopped, error), data-step (the last step done), data-steps and data-loss (the last loss), for
// browser/__tests__/demo_finetune.test.ts.
/* global tf, tfAttention, document, window, location, performance, clearTimeout, URLSearchParams, AbortController */
(function () {
  'use strict';

  const $ = (id) => document.getElementById(id);
  const CELL = 16;
  const DEBOUNCE_MS = 200;

  class InputError extends Error {}

  function range(n) {
    return Array.from({length: n}, (_, i) => i);
  }

  function argmax(row) {
    let best = 0;
    for (let i = 1; i < row.length; i++) if (row[i] > row[best]) best = i;
    return best;
  }

  // Tokens as digits ("31415": one token per digit) or numbers separated by spaces or commas
  // ("3 10 11 2"), each from 1 to vocabSize - 1 (0 is the padding token).
  function parseTokens(text, meta, what) {
    const t = text.trim();
    if (t === '') throw new InputError(`Type ${what}.`);
    const parts = /[\s,]/.test(t) ? t.split(/[\s,]+/).filter((p) => p !== '') : t.split('');
    const max = meta.vocabSize - 1;
    const tokens = parts.map((p) => {
      if (!/^\d+$/.test(p)) {
        throw new InputError(`"${p}" is not a token: use whole numbers from 1 to ${max}.`);
      }
      const n = Number(p);
      if (n < 1 || n > max) {
        throw new InputError(
          `${p} is out of range: tokens are 1 to ${max} (${meta.padId} is the padding token).`,
        );
      }
      return n;
    });
    if (tokens.length > meta.maxLen) {
      throw new InputError(
        `${tokens.length} tokens is too long: the model reads at most ${meta.maxLen}.`,
      );
    }
    return tokens;
  }

  function padded(tokens, meta) {
    return [...tokens, ...new Array(meta.maxLen - tokens.length).fill(meta.padId)];
  }

  const TASKS = {
    reverse: {
      example: '3 1 4 1 5 9 2 6',
      help: (m) =>
        `Up to ${m.maxLen} tokens from 1 to ${m.vocabSize - 1}: digits (31415) or numbers ` +
        'separated by spaces or commas (3 10 11 2). The model writes them in reverse order.',
      parse: (text, meta) => ({tokens: parseTokens(text, meta, 'a sequence of tokens')}),
      // the attention layers, each fed its own input (taken from a sub-model) and the lengths
      layers: ['mha1', 'mha2'],
      async run(model, input, meta, sub) {
        const {tokens} = input;
        const len = tokens.length;
        const outs = tf.tidy(() => {
          const x = [
            tf.tensor2d([padded(tokens, meta)], [1, meta.maxLen], 'int32'),
            tf.tensor2d([[len]], [1, 1], 'int32'),
          ];
          const pred = tf.argMax(model.predict(x), -1);
          const hidden = [].concat(sub.predict(x));
          const scores = this.layers.map(
            (name, i) =>
              model.getLayer(name).apply([hidden[i], x[1]], {returnAttentionScores: true})[1],
          );
          return [pred, ...scores];
        });
        const [pred, ...scores] = await Promise.all(outs.map((t) => t.array()));
        tf.dispose(outs);
        const out = pred[0].slice(0, len);
        const want = tokens.slice().reverse();
        const labels = tokens.map(String);
        return {
          prediction: out.join(' '),
          correct: out.every((t, i) => t === want[i]),
          expected: want.join(' '),
          heatmaps: scores.map((s, l) => ({
            // valid positions only: queries and keys past the length are padding
            weights: s[0].map((head) => head.slice(0, len).map((row) => row.slice(0, len))),
            xLabels: labels,
            yLabels: out.map((t, i) => `out ${i} = ${t}`),
            title: `${this.layers[l]}: MultiHeadAttention layer ${l + 1} of 2, per head`,
          })),
        };
      },
      subModel(model) {
        return tf.model({
          inputs: model.inputs,
          outputs: this.layers.map((name) => model.getLayer(name).input[0]),
        });
      },
    },

    addition: {
      example: '123+45',
      help: (m) =>
        `Two numbers from 0 to ${'9'.repeat(m.digits)} as a+b (123+45) or separated by a ` +
        'space or comma. The model writes the sum one character at a time (generate).',
      parse(text, meta) {
        const t = text.trim();
        if (t === '') throw new InputError('Type two numbers, e.g. 123+45.');
        const m = /^(\d+)\s*(?:\+|,|\s)\s*(\d+)\s*=?$/.exec(t);
        if (!m) {
          throw new InputError(
            `"${t}" is not an addition: type two numbers as 123+45 (or 123 45), digits only.`,
          );
        }
        for (const n of [m[1], m[2]]) {
          if (n.length > meta.digits) {
            throw new InputError(
              `${n} has more than ${meta.digits} digits: the model adds numbers from 0 to ` +
                `${'9'.repeat(meta.digits)}.`,
            );
          }
        }
        return {a: Number(m[1]), b: Number(m[2])};
      },
      layers: ['decoder_0', 'decoder_1'],
      async run(model, input, meta, sub) {
        const {a, b} = input;
        const voc = meta.vocabulary;
        const pad = (n) => String(n).padStart(meta.digits, '0');
        const promptText = `${pad(a)}+${pad(b)}=`;
        const prompt = [...promptText].map((c) => voc.indexOf(c));
        const ids0 = padded(prompt, meta);
        const out = await tfAttention.generate(model, [ids0], {
          maxLength: meta.maxLen,
          endId: meta.endId,
          padId: meta.padId,
        });
        const ids = (await out.array())[0];
        out.dispose();
        const text = ids.map((i) => voc[i]).join('');
        const answer = text.slice(meta.promptLen).split(voc[meta.endId])[0].replace(/_/g, '');
        const prediction = /^\d+$/.test(answer) ? String(Number(answer)) : answer;
        // the self-attention of each (post-norm) decoder block over that block's input, with a
        // causal mask, on the generated sequence
        const T = meta.maxLen;
        const outs = tf.tidy(() => {
          const x = tf.tensor2d([ids], [1, T], 'int32');
          const hidden = [].concat(sub.predict(x));
          const causal = tf.tensor3d(
            [range(T).map((q) => range(T).map((k) => (k <= q ? 1 : 0)))],
            [1, T, T],
            'bool',
          );
          return this.layers.map(
            (name, i) =>
              model.getLayer(name).selfAttention.apply(hidden[i], {
                attentionMask: causal,
                returnAttentionScores: true,
              })[1],
          );
        });
        const scores = await Promise.all(outs.map((t) => t.array()));
        tf.dispose(outs);
        // rows: the positions whose outputs are the answer (the "=" and the sum's digits)
        const from = meta.promptLen - 1;
        const labels = text.split('');
        return {
          prediction,
          correct: prediction === String(a + b),
          expected: String(a + b),
          generated: text,
          heatmaps: scores.map((s, l) => ({
            weights: s[0].map((head) => head.slice(from, T - 1)),
            xLabels: labels,
            yLabels: labels.slice(from + 1, T).map((c) => `writes ${c}`),
            title: `${this.layers[l]}: self-attention of decoder block ${l + 1} of 2, per head`,
          })),
        };
      },
      subModel(model) {
        return tf.model({
          inputs: model.inputs,
          outputs: this.layers.map((name) => model.getLayer(name).input),
        });
      },
    },

    lookup: {
      example: '5 17 3 22 9 ? 3',
      help: (m) =>
        `Distinct tokens from 1 to ${m.vocabSize - 1} (${m.minLen} to ${m.maxLen} of them), then ` +
        '? and a query token from the sequence: 5 17 3 22 9 ? 3. The model points at its position.',
      parse(text, meta) {
        const parts = text.split('?');
        if (parts.length !== 2) {
          throw new InputError('Type the tokens, then ? and the query token: 5 17 3 22 9 ? 3.');
        }
        const tokens = parseTokens(parts[0], meta, 'the tokens before ?');
        if (tokens.length < meta.minLen) {
          throw new InputError(`Type at least ${meta.minLen} tokens before ?.`);
        }
        const dup = tokens.find((t, i) => tokens.indexOf(t) !== i);
        if (dup !== undefined)
          throw new InputError(`${dup} occurs twice: the tokens are distinct.`);
        const q = parts[1].trim();
        if (!/^\d+$/.test(q)) throw new InputError('Type one query token (a number) after ?.');
        const query = Number(q);
        if (!tokens.includes(query)) {
          throw new InputError(`The query ${query} is not in the sequence.`);
        }
        return {tokens, query};
      },
      layers: ['attention'],
      async run(model, input, meta) {
        const {tokens, query} = input;
        const len = tokens.length;
        const probs = tf.tidy(() =>
          model.predict([
            tf.tensor2d([padded(tokens, meta)], [1, meta.maxLen], 'int32'),
            tf.tensor2d([[len]], [1, 1], 'int32'),
            tf.tensor2d([[query]], [1, 1], 'int32'),
          ]),
        );
        const p = (await probs.array())[0];
        probs.dispose();
        const pos = argmax(p);
        const want = tokens.indexOf(query);
        return {
          prediction: `position ${pos}`,
          correct: pos === want,
          expected: `position ${want}`,
          heatmaps: [
            {
              // the model's output is the AdditiveAttention weights of its one query
              weights: [[p.slice(0, len)]],
              xLabels: tokens.map(String),
              yLabels: [`query ${query}`],
              title: 'attention: AdditiveAttention weights of the query over the tokens',
            },
          ],
        };
      },
      subModel: () => null,
    },
  };

  // ---- state: loaded models per backend, one run at a time, the newest request wins ----

  const metas = {};
  let loaded = {}; // model name -> {model, sub}, for the current backend
  let queue = Promise.resolve();
  let requested = 0;
  let timer = null;

  function setState(state, extra) {
    const el = $('result');
    el.dataset.state = state;
    for (const [k, v] of Object.entries(extra || {})) el.dataset[k] = v;
  }

  function showError(message) {
    $('error').textContent = message;
  }

  function enqueue(job) {
    queue = queue.then(job).catch((e) => {
      setState('error');
      showError(`Error: ${e && e.message ? e.message : e}`);
    });
    return queue;
  }

  async function modelFor(name) {
    if (!loaded[name]) {
      const model = await tf.loadLayersModel(
        new URL(`models/${name}/model.json`, location.href).href,
      );
      metas[name] = model.getUserDefinedMetadata();
      loaded[name] = {model, sub: TASKS[name].subModel(model)};
    }
    return loaded[name];
  }

  function dropModels() {
    // every model is dropped, so every variable can go (disposing a model and then a sub-model
    // that shares its layers would dispose those layers twice)
    loaded = {};
    if (kerasModel !== null) {
      kerasModel = null;
      lm = null;
      resetFinetune();
      $('lm').hidden = true;
      kerasState('idle');
      kerasStatus('The backend changed: drop your model again to run it there.');
    }
    tf.disposeVariables();
  }

  // ---- your own Keras model ----

  let kerasModel = null; // the loaded model
  let lm = null; // {model, tokenizer, preprocessor} when it is a causal LM with a tokenizer
  let kerasQueue = Promise.resolve();
  const TOKENIZER_FILES = ['vocabulary.json', 'merges.txt', 'vocabulary.txt'];
  const pathOf = (f) => f.webkitRelativePath || f.name;
  const baseName = (p) => p.split('/').pop();

  function kerasState(state) {
    $('keras').dataset.state = state;
  }

  function kerasStatus(text) {
    $('keras-status').textContent = text;
  }

  function showProgress(fraction) {
    const bar = $('keras-progress');
    bar.hidden = false;
    bar.value = fraction;
    kerasStatus(`reading the weights… ${Math.round(fraction * 100)}%`);
  }

  function summaryOf(model) {
    const lines = [];
    model.summary(120, [0.5, 0.7, 0.88, 1], (line) => lines.push(line));
    return lines.join('\n');
  }

  // token ids [batch, T] in (a padding mask may follow), logits [batch, T, vocabulary] out
  function isCausalLM(model) {
    const ids = model.inputs[0];
    const out = model.outputs;
    return (
      ids.dtype === 'int32' &&
      ids.shape.length === 2 &&
      out.length === 1 &&
      out[0].shape.length === 3
    );
  }

  // tokenizer.json and its assets among the files, as tfAttention.loadTokenizer reads a folder
  async function tokenizerFrom(files) {
    const json = files.find((f) => baseName(pathOf(f)) === 'tokenizer.json');
    if (json === undefined) return null;
    const assets = {};
    for (const f of files) {
      if (TOKENIZER_FILES.includes(baseName(pathOf(f))))
        assets[baseName(pathOf(f))] = await f.text();
    }
    return tfAttention.tokenizerFromPreset(JSON.parse(await json.text()), assets);
  }

  // keras-hub's preprocessor.json when there is one, else the start token and the box's length
  async function preprocessorFrom(files) {
    const file = files.find((f) => baseName(pathOf(f)) === 'preprocessor.json');
    const config = file === undefined ? {} : (JSON.parse(await file.text()).config ?? {});
    return {
      sequenceLength: config.sequence_length ?? Number($('lm-max-length').value),
      addStartToken: config.add_start_token ?? true,
    };
  }

  async function loadKerasFiles(list) {
    const files = Array.from(list);
    lm = null;
    $('lm').hidden = true;
    $('keras-summary').hidden = true;
    $('keras-progress').value = 0;
    kerasState('loading');
    kerasStatus('reading…');
    // a keras-hub preset's weights are model.weights.h5 / task.weights.h5, not a whole model
    const modelFile = files.find(
      (f) => /\.(keras|h5|hdf5)$/i.test(f.name) && !/\.weights\.h5$/i.test(f.name),
    );
    const preset = modelFile === undefined && files.some((f) => f.name === 'config.json');
    let model;
    let tokenizer = null;
    let preprocessor = null;
    if (preset) {
      ({model, tokenizer, preprocessor} = await tfAttention.loadKerasHubPreset(files, {
        onProgress: showProgress,
      }));
    } else if (modelFile !== undefined) {
      model = await tfAttention.loadKerasModel(modelFile, {onProgress: showProgress});
      tokenizer = await tokenizerFrom(files);
      if (tokenizer !== null) preprocessor = await preprocessorFrom(files);
    } else {
      throw new Error(
        'expected a .keras or .h5 file, or a keras-hub preset folder; received ' +
          (files.map((f) => pathOf(f)).join(', ') || 'no file'),
      );
    }
    if (kerasModel !== null) kerasModel.dispose();
    kerasModel = model;
    showProgress(1);
    $('keras-summary').textContent = summaryOf(model);
    $('keras-summary').hidden = false;
    const causal = isCausalLM(model);
    resetFinetune();
    if (causal && tokenizer != null && preprocessor != null) {
      lm = {model, tokenizer, preprocessor};
      $('lm-max-length').value = String(preprocessor.sequenceLength);
      $('lm-output').textContent = '';
      $('lm').hidden = false;
    }
    const name = modelFile !== undefined ? modelFile.name : pathOf(files[0]).split('/')[0];
    kerasStatus(
      `${name}: ${model.countParams().toLocaleString('en')} parameters on ${tf.getBackend()}` +
        (lm !== null
          ? ' · a causal LM with its tokenizer: type a prompt'
          : causal
            ? ' · a causal LM: add its tokenizer files (tokenizer.json, assets/tokenizer/) to generate text'
            : ''),
    );
    kerasState('loaded');
  }

  async function generateFromPrompt() {
    if (lm === null) return;
    const out = $('lm-output');
    const prompt = $('lm-prompt').value;
    kerasState('generating');
    out.textContent = prompt;
    const step = $('lm-step');
    step.textContent = '';
    const [text] = await tfAttention.generateText(lm, prompt, {
      maxLength: Number($('lm-max-length').value),
      // which step runs: compiled, or the eager stepper and why
      onCompile: (report) => {
        step.textContent = tfAttention.stepReportText(report);
        step.dataset.compiled = String(report.compiled);
      },
      onToken: (row, id, piece) => {
        out.textContent += piece; // streamed as each token is chosen
      },
    });
    out.textContent = text;
    kerasState('generated');
  }

  // ---- fine-tuning the loaded causal LM on pasted text (tfAttention.finetune, LoRA) ----

  // a few short paragraphs, so that Start works at once; pasted text replaces them
  const SAMPLE_TEXT = [
    'The fox runs over the hill, and the hill runs under the fox.',
    'The dog sleeps by the door, and the door keeps the dog.',
    'A small world of words: the quick brown fox, the lazy dog, the quiet door.',
    'Hello world, hello hill, hello door; the fox says hello and runs.',
  ].join('\n\n');
  let training = null; // the AbortController of the run in progress
  let adapted = false; // the model has LoRA adapters (from a run): their rank is fixed

  function ftState(state, extra) {
    const el = $('ft');
    el.dataset.state = state;
    for (const [k, v] of Object.entries(extra || {})) el.dataset[k] = String(v);
  }

  function ftStatus(text) {
    $('ft-status').textContent = text;
  }

  function resetFinetune() {
    if (training !== null) training.abort();
    adapted = false;
    $('ft-rank').disabled = false;
    $('ft-progress').hidden = true;
    $('ft-progress').value = 0;
    $('ft-curve').textContent = '';
    ftStatus('');
    const el = $('ft');
    delete el.dataset.step;
    delete el.dataset.steps;
    delete el.dataset.loss;
    ftState('idle');
  }

  // a whole number >= min from an input, or an InputError saying what was expected
  function wholeFrom(id, name, min) {
    const raw = $(id).value.trim();
    const n = Number(raw);
    if (raw === '' || !Number.isInteger(n) || n < min) {
      throw new InputError(`${name}: expected a whole number from ${min}, received "${raw}".`);
    }
    return n;
  }

  function learningRateFrom(id) {
    const raw = $(id).value.trim();
    const n = Number(raw);
    if (raw === '' || !Number.isFinite(n) || n <= 0 || n > 1) {
      throw new InputError(
        `Learning rate: expected a number above 0 and at most 1 (e.g. 0.01), received "${raw}".`,
      );
    }
    return n;
  }

  function clock(ms) {
    const s = Math.max(0, Math.round(ms / 1000));
    return `${Math.floor(s / 60)}:${String(s % 60).padStart(2, '0')}`;
  }

  // The loss curve as an inline SVG: one point per step done (a circle with the step and its
  // loss, shown on hover), joined by a line; x from step 1 to the run's last step, so the curve
  // grows to the right as the run goes; y from the smallest to the largest loss so far.
  function lossCurveSvg(losses, steps) {
    const [W, H] = [480, 180];
    const [left, right, top, bottom] = [52, 12, 22, 30];
    const lo = Math.min(...losses);
    const hi = Math.max(...losses);
    const pad = (hi - lo || Math.abs(hi) || 1) * 0.05;
    const [y0, y1] = [lo - pad, hi + pad];
    const x = (i) => left + (steps <= 1 ? 0 : ((W - left - right) * i) / (steps - 1));
    const y = (l) => top + ((H - top - bottom) * (y1 - l)) / (y1 - y0);
    const xy = losses.map((l, i) => `${x(i).toFixed(1)},${y(l).toFixed(1)}`);
    const out = [
      `<svg xmlns="http://www.w3.org/2000/svg" width="${W}" height="${H}" viewBox="0 0 ${W} ${H}" font-family="sans-serif" font-size="11">`,
      '<title>Loss per step</title>',
      `<text x="${W / 2}" y="14" text-anchor="middle" font-size="13">loss per step</text>`,
      `<rect x="${left}" y="${top}" width="${W - left - right}" height="${H - top - bottom}" fill="none" stroke="#ccc"/>`,
      `<text x="${left - 4}" y="${top + 8}" text-anchor="end">${hi.toFixed(3)}</text>`,
      `<text x="${left - 4}" y="${H - bottom}" text-anchor="end">${lo.toFixed(3)}</text>`,
      `<text x="${left}" y="${H - bottom + 14}" text-anchor="middle">1</text>`,
      `<text x="${W - right}" y="${H - bottom + 14}" text-anchor="middle">${steps}</text>`,
      `<text x="${(left + W - right) / 2}" y="${H - 4}" text-anchor="middle">step</text>`,
      `<polyline points="${xy.join(' ')}" fill="none" stroke="#1f77b4" stroke-width="1.5"/>`,
    ];
    losses.forEach((l, i) => {
      out.push(
        `<circle class="point" cx="${x(i).toFixed(1)}" cy="${y(l).toFixed(1)}" r="2.5" fill="#1f77b4" data-step="${i + 1}" data-loss="${l}"><title>step ${i + 1}: loss ${l.toFixed(4)}</title></circle>`,
      );
    });
    out.push('</svg>');
    return out.join('');
  }

  async function fineTune() {
    if (lm === null) return;
    const text = $('ft-text').value;
    let options;
    let examples;
    try {
      if (text.trim() === '') {
        throw new InputError('Paste some text to fine-tune on: the text box is empty.');
      }
      options = {
        rank: wholeFrom('ft-rank', 'LoRA rank', 1),
        steps: wholeFrom('ft-steps', 'Steps', 1),
        batchSize: wholeFrom('ft-batch', 'Batch size', 1),
        learningRate: learningRateFrom('ft-lr'),
      };
      const length = lm.preprocessor.sequenceLength;
      examples = tfAttention.textExamples(lm.tokenizer, text, length);
      if (examples.length < options.batchSize) {
        const tokens = lm.tokenizer.encode(text).length;
        throw new InputError(
          `The text is too short for one batch: expected at least ${options.batchSize} ` +
            `examples (batch size ${options.batchSize}; paragraphs separated by a blank line, a ` +
            `paragraph over ${length - 1} tokens is cut), received ${examples.length} ` +
            `(${tokens} tokens). Paste more text or lower the batch size.`,
        );
      }
    } catch (e) {
      if (!(e instanceof InputError)) throw e;
      ftStatus(e.message);
      ftState('error');
      return;
    }
    training = new AbortController();
    const losses = [];
    const bar = $('ft-progress');
    const curve = $('ft-curve');
    bar.value = 0;
    bar.hidden = false;
    curve.textContent = '';
    $('ft-button').textContent = 'Stop';
    for (const id of ['ft-rank', 'ft-steps', 'ft-batch', 'ft-lr', 'ft-text', 'lm-generate']) {
      $(id).disabled = true;
    }
    ftState('training', {step: 0, steps: options.steps, loss: ''});
    ftStatus(
      `${examples.length} examples · starting on ${tf.getBackend()}…` +
        (adapted ? ' (the adapters of the last run train on; their rank stays)' : ''),
    );
    const run = lm;
    try {
      const result = await tfAttention.finetune(run, examples, {
        ...options,
        signal: training.signal,
        // awaited by finetune before its next step, which then yields to the event loop: the
        // bar, the status and the curve are painted between steps, and Stop is heard
        onProgress: async (p) => {
          losses.push(p.loss);
          bar.value = p.step / p.steps;
          ftStatus(
            `step ${p.step}/${p.steps} · loss ${p.loss.toFixed(4)} · ` +
              `${Math.round(p.tokensPerSecond).toLocaleString('en')} tokens/s · ` +
              `${clock(p.remainingMs)} left`,
          );
          curve.innerHTML = lossCurveSvg(losses, p.steps);
          ftState('training', {step: p.step, loss: p.loss});
        },
      });
      if (lm !== run) return; // the model was dropped while it trained (a backend switch)
      adapted = true;
      const n = result.losses.length;
      const stopped = n < options.steps;
      const first = result.losses[0];
      const last = result.losses[n - 1];
      ftStatus(
        (stopped ? `stopped after ${n} of ${options.steps} steps` : `${n} steps`) +
          ` in ${clock(result.ms)} on ${tf.getBackend()}` +
          (n > 0 ? `, loss ${first.toFixed(4)} → ${last.toFixed(4)}` : '') +
          ` · ${result.tokens.toLocaleString('en')} tokens · the prompt box above now generates ` +
          'from the fine-tuned model',
      );
      ftState(stopped ? 'stopped' : 'trained', {step: n});
    } catch (e) {
      if (lm !== run) return; // its weights went with the backend: the page says so in #keras
      ftStatus(`Error: ${e && e.message ? e.message : e}`);
      ftState('error');
    } finally {
      training = null;
      $('ft-button').textContent = 'Start';
      for (const id of ['ft-steps', 'ft-batch', 'ft-lr', 'ft-text', 'lm-generate']) {
        $(id).disabled = false;
      }
      $('ft-rank').disabled = adapted;
    }
  }

  function kerasJob(job) {
    kerasQueue = kerasQueue.then(job).catch((e) => {
      kerasState('error');
      kerasStatus(`Error: ${e && e.message ? e.message : e}`);
    });
    return kerasQueue;
  }

  // the files of a dropped folder, with their paths inside it (as <input webkitdirectory> gives)
  async function entryFiles(entry, prefix) {
    if (entry.isFile) {
      const file = await new Promise((resolve, reject) => entry.file(resolve, reject));
      Object.defineProperty(file, 'webkitRelativePath', {value: prefix + file.name});
      return [file];
    }
    const reader = entry.createReader();
    const entries = [];
    for (;;) {
      const batch = await new Promise((resolve, reject) => reader.readEntries(resolve, reject));
      if (batch.length === 0) break;
      entries.push(...batch);
    }
    const nested = await Promise.all(entries.map((e) => entryFiles(e, `${prefix}${entry.name}/`)));
    return nested.flat();
  }

  function initKeras() {
    const drop = $('keras-drop');
    drop.addEventListener('dragover', (e) => {
      e.preventDefault();
      drop.classList.add('over');
    });
    drop.addEventListener('dragleave', () => drop.classList.remove('over'));
    drop.addEventListener('drop', (e) => {
      e.preventDefault();
      drop.classList.remove('over');
      const items = Array.from(e.dataTransfer.items || []);
      const entries = items.map((i) => (i.webkitGetAsEntry ? i.webkitGetAsEntry() : null));
      if (training !== null) training.abort(); // a new model: the run in progress stops
      kerasJob(async () => {
        const files = entries.every((x) => x !== null)
          ? (await Promise.all(entries.map((x) => entryFiles(x, '')))).flat()
          : Array.from(e.dataTransfer.files);
        await loadKerasFiles(files);
      });
    });
    for (const id of ['keras-files', 'keras-folder']) {
      $(id).addEventListener('change', (e) => {
        if (training !== null) training.abort(); // a new model: the run in progress stops
        kerasJob(() => loadKerasFiles(e.target.files));
      });
    }
    $('lm-generate').addEventListener('click', () => kerasJob(generateFromPrompt));
    $('ft-text').value = SAMPLE_TEXT;
    // Start queues a run; while one runs the button is Stop, which aborts it between steps
    $('ft-button').addEventListener('click', () => {
      if (training !== null) training.abort();
      else kerasJob(fineTune);
    });
  }

  function clearResult() {
    $('prediction').textContent = '';
    $('check').textContent = '';
    $('check').className = '';
    $('heatmaps').textContent = '';
  }

  async function run(id) {
    if (id !== requested) return; // a newer request is queued
    const name = $('model').value;
    const text = $('sequence').value;
    const task = TASKS[name];
    setState('running');
    $('status').textContent = `running on ${tf.getBackend()}…`;
    const {model, sub} = await modelFor(name);
    const meta = metas[name];
    $('help').textContent = task.help(meta);
    let input;
    try {
      input = task.parse(text, meta);
    } catch (e) {
      if (!(e instanceof InputError)) throw e;
      clearResult();
      showError(e.message);
      $('status').textContent = `backend: ${tf.getBackend()}`;
      setState('error', {model: name, input: text, backend: tf.getBackend()});
      return;
    }
    const start = performance.now();
    const result = await task.run(model, input, meta, sub);
    const ms = performance.now() - start;
    if (id !== requested) return;
    showError('');
    $('prediction').textContent = result.prediction;
    $('check').textContent = result.correct ? '✓ correct' : `✗ expected ${result.expected}`;
    $('check').className = result.correct ? 'ok' : 'wrong';
    $('heatmaps').innerHTML = result.heatmaps
      .map((h) =>
        tfAttention.attentionHeatmapSvg(h.weights, {
          xLabels: h.xLabels,
          yLabels: h.yLabels,
          title: h.title,
          titles: h.weights.map((_, i) => `head ${i}`),
          cellSize: CELL,
        }),
      )
      .join('');
    $('status').textContent =
      `backend: ${tf.getBackend()} · prediction and attention in ${ms.toFixed(1)} ms` +
      (result.generated ? ` · generated ${result.generated}` : '');
    setState('done', {model: name, input: text, backend: tf.getBackend()});
  }

  function schedule() {
    const id = ++requested;
    return enqueue(() => run(id));
  }

  // A backend that does not start (webgpu in most browsers) leaves the page on the one it was
  // on; the notice saying so stays until a backend switch succeeds, runs do not erase it.
  function showNotice(message) {
    $('notice').textContent = message;
    $('notice').hidden = message === '';
  }

  async function switchBackend(name) {
    const before = tf.getBackend();
    if (name === before) return true;
    setState('running');
    $('status').textContent = `starting ${name}…`;
    let ok = false;
    try {
      ok = await tf.setBackend(name);
      await tf.ready();
    } catch {
      ok = false;
    }
    if (!ok || tf.getBackend() !== name) {
      if (before && tf.getBackend() !== before) await tf.setBackend(before);
      await tf.ready();
      $('backend').value = tf.getBackend();
      showNotice(
        `The ${name} backend could not start in this browser; running on ${tf.getBackend()}.`,
      );
      return false;
    }
    showNotice('');
    dropModels(); // the weights live on the old backend; load them again on the new one
    return true;
  }

  function init() {
    if (typeof tf === 'undefined' || typeof tfAttention === 'undefined') {
      showError('tfjs or tfjs-attention did not load (is dist/tfjs-attention.min.js built?).');
      setState('error');
      return;
    }
    tf.wasm.setWasmPaths(new URL('wasm/', location.href).href);
    initKeras();
    const params = new URLSearchParams(location.search);
    const model = params.get('model');
    if (model && TASKS[model]) $('model').value = model;
    $('sequence').value = params.get('input') || TASKS[$('model').value].example;
    $('sequence').addEventListener('input', () => {
      clearTimeout(timer);
      timer = window.setTimeout(schedule, DEBOUNCE_MS);
    });
    $('model').addEventListener('change', () => {
      $('sequence').value = TASKS[$('model').value].example;
      clearTimeout(timer);
      schedule();
    });
    $('backend').addEventListener('change', () => {
      clearTimeout(timer);
      const id = ++requested;
      const name = $('backend').value;
      // a backend that does not start leaves its notice shown, and the page runs on the old one
      enqueue(async () => {
        await switchBackend(name);
        await run(id);
      });
    });
    const backend = params.get('backend');
    enqueue(async () => {
      await tf.ready();
      if (backend) await switchBackend(backend);
      $('backend').value = tf.getBackend();
    });
    schedule();
  }

  init();
})();
