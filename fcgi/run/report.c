/*
 * report.c - init's report as the worker reads it (report.h).
 */
#include "run/report.h"

#include "core/files.h"
#include "box/sandbox.h"
#include "core/sessionproto.h"
#include "core/util.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The first allocation: the fixed part and a small result. */
#define REPORT_FIRST_BYTES 4096

static bool report_header(const struct report_buf *rb, struct sandbox_report *rep);

/* Room for the next read: a first block, then, once the fixed part is in, the size it
 * announces and one byte more (a longer report is then seen as not one), at most max. Grown
 * once: what comes past it is read and discarded. */
static void
report_grow(struct report_buf *rb)
{
	struct sandbox_report rep;
	size_t want;

	if (rb->b.len < rb->b.cap || rb->b.cap >= rb->max)
		return;
	if (rb->b.len < sizeof(rep))
		want = REPORT_FIRST_BYTES;
	else if (report_header(rb, &rep))
		want = sizeof(rep) + (size_t)rep.result_len + (size_t)rep.artifacts_len +
		       (size_t)rep.value_len + (size_t)rep.cell_len + 1;
	else
		return; /* not a report: the rest is read and discarded */
	if (want <= rb->b.cap)
		return; /* all it announced is in: the rest only shows it too long */
	if (want > rb->max)
		want = rb->max;
	/* failed: the rest goes to the sink, an incomplete report (the sandbox's fault) */
	(void)buf_resize(&rb->b, want);
}

void
report_drain(int *fd, struct report_buf *rb)
{
	for (int i = 0; i < RUN_READS_PER_WAKE && *fd >= 0; i++) {
		char sink[4096];
		report_grow(rb);
		char *dst = rb->b.len < rb->b.cap ? rb->b.p + rb->b.len : sink;
		size_t room = rb->b.len < rb->b.cap ? rb->b.cap - rb->b.len : sizeof(sink);
		ssize_t r = read(*fd, dst, room);
		if (r > 0) {
			if (dst != sink)
				rb->b.len += (size_t)r;
			continue;
		}
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0 && errno == EAGAIN)
			return;
		util_close_fd(fd);
	}
}

/* The fixed part of init's report, when it is in and is one (its magic). */
static bool
report_header(const struct report_buf *rb, struct sandbox_report *rep)
{
	if (rb->b.len < sizeof(*rep))
		return false;
	memcpy(rep, rb->b.p, sizeof(*rep));
	return rep->magic == SANDBOX_REPORT_MAGIC;
}

bool
report_complete(const struct report_buf *rb)
{
	struct sandbox_report rep;

	return report_header(rb, &rep) && rb->b.len >= sizeof(rep) + (size_t)rep.result_len +
	                                                   rep.artifacts_len + rep.value_len +
	                                                   rep.cell_len;
}

long long
report_cpu_ms(const struct rusage *ru)
{
	return (long long)(ru->ru_utime.tv_sec + ru->ru_stime.tv_sec) * 1000 +
	       (ru->ru_utime.tv_usec + ru->ru_stime.tv_usec) / 1000;
}

bool
report_read(struct report_buf *rb, size_t max_result_bytes, struct outcome_facts *f,
            struct run_outcome *out)
{
	struct sandbox_report rep;

	if (!report_header(rb, &rep) ||
	    rb->b.len != sizeof(rep) + (size_t)rep.result_len + rep.artifacts_len + rep.value_len +
	                     rep.cell_len ||
	    rep.result_len > max_result_bytes || rep.artifacts_len > ARTIFACTS_BLOB_MAX ||
	    rep.value_len > SESSION_VALUE_MAX || rep.cell_len > SESSION_CELL_MAX)
		return false;
	out->cell_dropped = rep.cell_dropped != 0;
	out->session_over = rep.session_over != 0;
	out->has_value = rep.has_value != 0;
	out->value_len = rep.value_len;
	f->wait_status = rep.program_status;
	f->have_status = rep.program_reaped != 0;
	f->stopped = rep.stopped != 0;
	f->disk_full = rep.disk_full != 0;
	out->result_status = (enum result_status)rep.result_status;
	if (out->result_status == RESULT_OK) {
		out->result_json = malloc(rep.result_len + 1);
		if (out->result_json == NULL) {
			out->result_status = RESULT_NONE;
		} else {
			memcpy(out->result_json, rb->b.p + sizeof(rep), rep.result_len);
			out->result_json[rep.result_len] = '\0';
			out->result_len = rep.result_len;
		}
	}
	if (rep.artifacts_len > 0) {
		/* untrusted, like all of the report: artifacts_next() checks every record. The
		 * outcome takes the report's buffer: the artifacts' bytes stay where they were read
		 */
		out->artifacts_mem = rb->b.p;
		out->artifacts = rb->b.p + sizeof(rep) + rep.result_len;
		out->artifacts_len = rep.artifacts_len;
		rb->b.p = NULL;
		rb->b.cap = 0;
	}
	if (out->has_value || rep.cell_len > 0) {
		/* after the artifacts, in the same buffer: whoever took it owns the value and the
		 * cell too */
		const char *base = out->artifacts_mem != NULL ? out->artifacts_mem : rb->b.p;
		if (out->has_value)
			out->value = base + sizeof(rep) + rep.result_len + rep.artifacts_len;
		if (rep.cell_len > 0) {
			out->cell =
			    base + sizeof(rep) + rep.result_len + rep.artifacts_len + rep.value_len;
			out->cell_len = rep.cell_len;
		}
		if (out->artifacts_mem == NULL) {
			out->value_mem = rb->b.p;
			rb->b.p = NULL;
			rb->b.cap = 0;
		}
	}
	out->cpu_ms = report_cpu_ms(&rep.children);
	out->minor_faults = rep.children.ru_minflt;
	out->max_rss_bytes = (long long)rep.children.ru_maxrss * 1024;
	return true;
}
