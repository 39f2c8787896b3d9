/* next_plugin.so: linked with the interposer, next_y.so and next_shim.so,
 * in that order (next_main.c's plugin). */
__attribute__((visibility("default"))) int next_plugin(void) { return 1; }
