/* uepoll.h is self-contained: it is the first and only include here. */
#include <uepoll/uepoll.h>

int uepoll_h_alone_fd_base(void) { return UEPOLL_FD_BASE; }
