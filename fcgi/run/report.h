/*
 * report.h - init's report (sandbox.h's struct sandbox_report) as the worker reads it: a
 * bounded buffer filled from the report pipe while the run is watched (run.c, sessionrun.c),
 * and its reading once it is in. The report is untrusted, as is everything from inside the
 * sandbox: every length is checked against its bound before it is used.
 */
#ifndef CODEBOX_REPORT_H
#define CODEBOX_REPORT_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/resource.h>

#include "core/buf.h"
#include "core/outcome.h"

/* Reads of one pipe per wake-up, so a flood on one stream cannot starve the other. */
#define RUN_READS_PER_WAKE 16

/* A bounded buffer for init's report: nothing is reserved ahead; it grows to the size the
 * report's fixed part announces (at most max), so print(1)'s costs a page, not the bound. */
struct report_buf {
	struct buf b;
	size_t max;
};

/* Drains what is available on *fd (non-blocking) into rb, at most RUN_READS_PER_WAKE reads;
 * closes it at EOF. What comes past the bound is read and discarded. */
void report_drain(int *fd, struct report_buf *rb);

/* Whether init's whole report is in: the fixed part and what it announces. */
bool report_complete(const struct report_buf *rb);

/*
 * Namespace mode: init's report, if it is complete, into f (the program's status, the stop,
 * a full disk) and out (result.json, the artifacts, a cell's value and JSON, the program's
 * usage). Returns whether it was. out may take rb's buffer (out->artifacts_mem, value_mem).
 */
bool report_read(struct report_buf *rb, size_t max_result_bytes, struct outcome_facts *f,
                 struct run_outcome *out);

/* The CPU time of ru, user and system, in milliseconds. */
long long report_cpu_ms(const struct rusage *ru);

#endif
