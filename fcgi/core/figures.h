/*
 * figures.h - matplotlib in a run: the Agg backend, a font cache built ahead, and every
 * figure a program shows (plt.show()) or leaves open returned as figure-N.png in its working
 * directory, where "artifacts" and MCP's image blocks find it.
 *
 * One Python source, installed two ways: a warm interpreter runs it once, before its modules
 * are imported (interp.c); a cold run finds it as the sandbox's sitecustomize.py (the pool
 * writes it into the sandbox's /etc, where Debian's /usr/lib/python3.X/sitecustomize.py
 * points). It only hooks the import of matplotlib: a program that never imports it runs as
 * before, and nothing is added to the run's environment or its working directory.
 */
#ifndef CODEBOX_FIGURES_H
#define CODEBOX_FIGURES_H

/* The font cache install-deps.sh and the image build ahead (MPLCONFIGDIR while they do). */
#define FIGURES_CACHE_DIR "/usr/local/share/codebox/matplotlib"

/* Where the sandbox's /etc holds it: Debian's /usr/lib/python3.11/sitecustomize.py is a link to
 * /etc/python3.11/sitecustomize.py (the interpreter is 3.11: WARM_INTERPRETER). */
#define FIGURES_SITE_DIR "python3.11"

/* The hook's source: defines install(), which a caller runs once. */
extern const char figures_source[];

/* The source of the sandbox's sitecustomize.py: the hook, installed. */
extern const char figures_sitecustomize[];

#endif
