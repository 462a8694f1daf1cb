// Drops tfjs's "install the node backend" banner from test output; other warnings pass through.
const warn = console.warn.bind(console);
console.warn = (...args: unknown[]) => {
  if (
    typeof args[0] === 'string' &&
    args[0].includes('looks like you are running TensorFlow.js in Node.js')
  ) {
    return;
  }
  warn(...args);
};
