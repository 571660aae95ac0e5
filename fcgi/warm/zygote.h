/*
 * zygote.h - the warm interpreters' root process: the pool's binary run again, a program
 * image of its own (warm.c starts it; main() hands it over here).
 */
#ifndef CODEBOX_ZYGOTE_H
#define CODEBOX_ZYGOTE_H

#include <stdnoreturn.h>

/*
 * The zygote's main, called by main() when the binary is run as the zygote: reads its
 * configuration from the supervisor, starts the interpreter, imports the preloaded modules and
 * keeps the templates of both tiers. Never returns.
 */
noreturn void zygote_main(void);

#endif
