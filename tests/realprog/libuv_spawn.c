/* realprog.libuv: a libuv program (Debian's shared libuv1) that spawns
 * children with pipes on their stdin and stdout, as node's child_process
 * does: each child (`cat`) echoes what the loop writes to it, then exits
 * when its stdin closes; a shell child exits with a status of its own. The
 * loop must read every byte back, see each exit with its status, and end
 * with nothing left open. Run as it is (the kernel's objects) and under
 * LD_PRELOAD of libuepoll-interpose.so in the default mode (uepoll's
 * pipes and eventfds for the loop, the kernel's for what crosses exec).
 * Prints one line per child and "ok" at the end; exit 0 when all held. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

enum { kChildren = 4, kMessage = 100000 };

struct Child {
  uv_process_t proc;
  uv_pipe_t in, out;
  uv_write_t wr;
  uv_buf_t msg;
  size_t got;
  int exited;
  int64_t status;
  int closed;
  char expect;
};

static struct Child children[kChildren];
static uv_process_t shell;
static int64_t shell_status = -1;
static int failures;

static void on_close(uv_handle_t *h) { ++((struct Child *)h->data)->closed; }

static void on_alloc(uv_handle_t *h, size_t want, uv_buf_t *buf) {
  (void)h;
  buf->base = malloc(want);
  buf->len = want;
}

static void on_read(uv_stream_t *s, ssize_t n, const uv_buf_t *buf) {
  struct Child *c = s->data;
  for (ssize_t i = 0; i < n; ++i) {
    if (buf->base[i] != c->expect) ++failures;
  }
  if (n > 0) c->got += (size_t)n;
  if (n < 0) uv_close((uv_handle_t *)s, on_close); /* EOF */
  free(buf->base);
}

static void on_written(uv_write_t *w, int status) {
  struct Child *c = w->data;
  if (status) ++failures;
  uv_close((uv_handle_t *)&c->in, on_close); /* the child's EOF */
}

static void on_exit_child(uv_process_t *p, int64_t status, int sig) {
  struct Child *c = p->data;
  c->exited = 1;
  c->status = status + sig;
  uv_close((uv_handle_t *)p, on_close);
}

static void on_exit_shell(uv_process_t *p, int64_t status, int sig) {
  (void)sig;
  shell_status = status;
  uv_close((uv_handle_t *)p, NULL);
}

int main(void) {
  uv_loop_t *loop = uv_default_loop();
  for (int i = 0; i < kChildren; ++i) {
    struct Child *c = &children[i];
    c->expect = (char)('a' + i);
    c->proc.data = c->in.data = c->out.data = c->wr.data = c;
    uv_pipe_init(loop, &c->in, 0);
    uv_pipe_init(loop, &c->out, 0);
    uv_stdio_container_t stdio[3] = {
        {.flags = UV_CREATE_PIPE | UV_READABLE_PIPE,
         .data.stream = (uv_stream_t *)&c->in},
        {.flags = UV_CREATE_PIPE | UV_WRITABLE_PIPE,
         .data.stream = (uv_stream_t *)&c->out},
        {.flags = UV_INHERIT_FD, .data.fd = 2}};
    char *args[] = {"cat", NULL};
    uv_process_options_t o = {.exit_cb = on_exit_child,
                              .file = "cat",
                              .args = args,
                              .stdio = stdio,
                              .stdio_count = 3};
    int r = uv_spawn(loop, &c->proc, &o);
    if (r) {
      fprintf(stderr, "spawn: %s\n", uv_strerror(r));
      return 1;
    }
    c->msg.base = malloc(kMessage);
    memset(c->msg.base, c->expect, kMessage);
    c->msg.len = kMessage;
    uv_read_start((uv_stream_t *)&c->out, on_alloc, on_read);
    uv_write(&c->wr, (uv_stream_t *)&c->in, &c->msg, 1, on_written);
  }
  char *sh_args[] = {"sh", "-c", "echo spawned >/dev/null; exit 3", NULL};
  uv_stdio_container_t sh_stdio[3] = {{.flags = UV_IGNORE},
                                      {.flags = UV_IGNORE},
                                      {.flags = UV_INHERIT_FD, .data.fd = 2}};
  uv_process_options_t so = {.exit_cb = on_exit_shell,
                             .file = "sh",
                             .args = sh_args,
                             .stdio = sh_stdio,
                             .stdio_count = 3};
  if (uv_spawn(loop, &shell, &so)) return 1;
  uv_run(loop, UV_RUN_DEFAULT);
  for (int i = 0; i < kChildren; ++i) {
    struct Child *c = &children[i];
    printf("child %d: read %zu of %d, exited %d status %lld, closed %d\n", i,
           c->got, kMessage, c->exited, (long long)c->status, c->closed);
    if (c->got != kMessage || !c->exited || c->status != 0 || c->closed != 3) {
      ++failures;
    }
    free(c->msg.base);
  }
  printf("shell: status %lld\n", (long long)shell_status);
  if (shell_status != 3) ++failures;
  if (uv_loop_close(loop) != 0) ++failures;
  printf("%s\n", failures ? "FAILED" : "ok");
  return failures ? 1 : 0;
}
