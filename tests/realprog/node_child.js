// realprog.node: node's child_process (execFile, spawn with piped stdin and
// stdout: libuv's pipes, its raw syscall(SYS_close), fork and exec) and an
// http round trip, printed line by line; node.sh compares the output under
// the interposer with the kernel's.
const { execFile, spawn } = require('child_process');
const http = require('http');
execFile('/bin/echo', ['hello'], (err, out) => {
  if (err) { console.log('execFile error', err); process.exit(1); }
  console.log('execFile:', out.trim());
  const c = spawn('/bin/cat'); let got = '';
  c.stdout.on('data', d => got += d);
  c.on('close', code => {
    console.log('spawn cat:', got.trim(), code);
    const srv = http.createServer((q, r) => r.end('ok')).listen(0, () => {
      http.get({port: srv.address().port}, res => { let b=''; res.on('data', d=>b+=d); res.on('end', () => { console.log('http:', b); srv.close(); }); });
    });
  });
  c.stdin.end('piped');
});
