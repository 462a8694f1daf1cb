#!/usr/bin/env bash
# Optional: makes @tensorflow/tfjs-node loadable on a machine that reaches only the npm and PyPI
# registries. Its normal install downloads libtensorflow 2.9.1 and a prebuilt addon from
# storage.googleapis.com; instead this takes the TensorFlow C library and headers from the
# `tensorflow-cpu` wheel on PyPI and builds the addon from source (needs python3, make, g++ and
# Node's headers, e.g. /usr/include/node). Not needed by the tests: they use tfjs-node when it
# loads and skip its backend otherwise.
#
#   scripts/tfjs-node-from-wheel.sh [tensorflow-cpu version, default 2.19.0]
set -euo pipefail
cd "$(dirname "$0")/.."
TF_VERSION="${1:-2.19.0}"
WORK="${TMPDIR:-/tmp}/tfjs-node-wheel"
mkdir -p "$WORK"

echo "1/4 npm package @tensorflow/tfjs-node@4.22.0 without its install script"
npm install --no-save --ignore-scripts --no-audit --no-fund @tensorflow/tfjs-node@4.22.0
PKG=node_modules/@tensorflow/tfjs-node

echo "2/4 TensorFlow C library from the tensorflow-cpu ${TF_VERSION} wheel (PyPI)"
if [ ! -d "$WORK/tensorflow" ]; then
  python3 -m pip download --no-deps --only-binary=:all: -d "$WORK" "tensorflow-cpu==${TF_VERSION}"
  # the C API headers include tsl / xla headers too: take the whole include tree, and the two libraries
  (cd "$WORK" && python3 -c "import zipfile,glob; z=zipfile.ZipFile(glob.glob('tensorflow_cpu-*.whl')[0]); [z.extract(n) for n in z.namelist() if n.startswith('tensorflow/include/') or (n.endswith('.so.2') and n.count('/') == 1)]")
fi

echo "3/4 deps/ for the addon: C headers and libtensorflow.so.2 (the wheel's libtensorflow_cc.so.2 exports the C API)"
rm -rf "$PKG/deps" && mkdir -p "$PKG/deps/include" "$PKG/deps/lib"
cp -r "$WORK/tensorflow/include/." "$PKG/deps/include/"
cp "$WORK/tensorflow/libtensorflow_cc.so.2" "$PKG/deps/lib/libtensorflow_cc.so.2"
ln -sf libtensorflow_cc.so.2 "$PKG/deps/lib/libtensorflow.so.2" # the addon links to its SONAME
cp "$WORK/tensorflow/libtensorflow_framework.so.2" "$PKG/deps/lib/libtensorflow_framework.so.2"
ln -sf libtensorflow.so.2 "$PKG/deps/lib/libtensorflow.so"
ln -sf libtensorflow_framework.so.2 "$PKG/deps/lib/libtensorflow_framework.so"

echo "4/4 build the addon from source against Node's local headers"
NODEDIR="$(dirname "$(dirname "$(readlink -f "$(command -v node)")")")"
(cd "$PKG" && npx --no-install node-pre-gyp rebuild --build-from-source --nodedir="$NODEDIR")
node -e "require('@tensorflow/tfjs-node'); const tf = require('@tensorflow/tfjs'); console.log('tfjs-node loads; backend', tf.getBackend())"
