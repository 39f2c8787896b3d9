/* A plugin whose constructor makes a pipe (a library's self-pipe at load),
 * for lazy_races.c: it first calls the program's hook, which returns once
 * another thread is waiting for the dynamic loader's lock that this
 * constructor runs under. */
#include <dlfcn.h>
#include <unistd.h>

__attribute__((visibility("default"))) int lazy_plugin_pipe_result = -2;
__attribute__((visibility("default"))) int lazy_plugin_fds[2] = {-1, -1};

__attribute__((constructor)) static void Init(void) {
  void (*hook)(void);
  *(void **)&hook = dlsym(RTLD_DEFAULT, "lazy_races_plugin_hook");
  if (hook) hook();
  lazy_plugin_pipe_result = pipe(lazy_plugin_fds);
}
