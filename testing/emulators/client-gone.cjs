// Preloaded into dynalite and kinesalite (node --require). Both rethrow a request's "error"
// event, and Node emits one ("aborted", ECONNRESET) when a client goes away in the middle of
// sending its request: a test that SIGKILLs a job talking to the emulator then ended the
// emulator for every other client (a checkpoint table vanished under the next job). Such an
// error is the departed client's; it is logged and the emulator serves on. Any other uncaught
// error still ends the process, with its stack, as it would without this file.
'use strict';

const clientGone = new Set(['ECONNRESET', 'ECONNABORTED', 'EPIPE']);

process.on('uncaughtException', (err) => {
  if (err && (clientGone.has(err.code) || err.message === 'aborted')) {
    console.error(`emulator: a client went away in the middle of a request (${err.code || err.message}); serving on`);
    return;
  }
  console.error(err);
  process.exit(70);
});
