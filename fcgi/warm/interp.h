/*
 * interp.h - the embedded interpreter of the warm processes (the zygote, its templates and
 * the runs cloned from them): its start, the preloaded modules, and a run's entry. Only the
 * processes that hold interpreters for untrusted code link this in a meaningful way; the
 * pool's supervisor and workers never call it.
 */
#ifndef CODEBOX_INTERP_H
#define CODEBOX_INTERP_H

#include <stdbool.h>
#include <stddef.h>

#include "warm/warm.h"

struct sandbox_spec;

/*
 * Starts the interpreter python as `python3 -I -u main.py` configures itself and imports the
 * light tier's modules of s. Returns 0, or -1 with the reason in why.
 */
int interp_init(const struct warm_settings *s, const char *python, char *why, size_t why_len);

/*
 * Imports the modules of one tier of s (light: the zygote's; else the heavy template's), runs
 * the warm-up exercise for them, finds every random generator they keep (reseeded per run)
 * and freezes the garbage collector. Returns 0, or -1 with why.
 */
int interp_import(const struct warm_settings *s, bool light, char *why, size_t why_len);

/* The number of threads of this process, or -1. A user namespace needs exactly one. */
int interp_threads(void);

/* Backs every private anonymous mapping with huge pages where 2 MiB-aligned ranges exist, so
 * that copying the process costs page-table entries per 2 MiB, not per 4 KiB. */
void interp_collapse(void);

/* The size of this process's address space (a run's RLIMIT_AS is counted above it). */
unsigned long long interp_address_space_bytes(void);

/* Reads the fields of the memory map a process cannot change (for a run's /proc view). */
void interp_read_mm(void);

/*
 * A run's side of its start, once every step that does not need the request is in force
 * (sandbox.c's prepare): reseeds every generator, sets the environment, argv, signals and
 * /proc view. No code of the run executes. Returns 0 or -1 (the run then execs cold).
 */
int interp_prepare(const struct sandbox_spec *s);

/*
 * The program's entry in place of execve(): runs main.py as `python3 -I -u main.py` does and
 * exits with its status. Returns only when it could not take over before any of the run's
 * code executed.
 */
void interp_enter(const struct sandbox_spec *s);

/*
 * A session's program (sessionproto.h): runs cells on s->cell_fd in one __main__ until init
 * closes it; never returns once it began. Returns only when the interpreter cannot prepare.
 */
void interp_enter_session(const struct sandbox_spec *s);

#endif
