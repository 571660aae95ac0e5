/*
 * log.c - structured logging for the pool and its workers.
 *
 * Every line is a JSON object so that nginx's access log and the worker's log can be joined
 * on requestId (and, for a request that came with a W3C traceparent, on traceId). Lines are written
 * with one write(2) each (stderr is shared by every worker, and O_APPEND pipes and files keep a
 * single write of this size whole). On a file, a write that the disk cannot hold whole would leave
 * a torn line, so the file keeps room reserved past its end (fallocate, LOG_RESERVE_BYTES at a
 * time); a line that finds no room is dropped whole (log_write()).
 */
#include "core/log.h"

#include "core/jsonw.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static const char *log_component = "codebox";
static char log_request_id[129];
static char log_trace_id[33];

void
log_set_component(const char *component)
{
	log_component = component;
}

void
log_set_request_id(const char *id)
{
	if (id == NULL) {
		log_request_id[0] = '\0';
		return;
	}
	snprintf(log_request_id, sizeof(log_request_id), "%s", id);
}

void
log_set_trace_id(const char *id)
{
	snprintf(log_trace_id, sizeof(log_trace_id), "%s", id != NULL ? id : "");
}

static const char *
log_level_string(enum log_level level)
{
	switch (level) {
	case LOG_DEBUG:
		return "debug";
	case LOG_INFO:
		return "info";
	case LOG_WARN:
		return "warn";
	case LOG_ERROR:
		return "error";
	}
	return "info";
}

static void log_line(enum log_level level, const char *fields, const char *msg);

/* The room a log file keeps allocated past its end: every worker's next line fits in it. */
#define LOG_RESERVE_BYTES (256 * 1024)
#define LOG_HEADROOM_BYTES (64 * 1024)

/*
 * Writes one line to stderr whole, or not at all. A pipe (the pod's log) takes a write of
 * this size whole; a regular file takes it whole while blocks are allocated past its end for
 * it, so it is written only after that room is there (reserved again when little is left).
 * Several workers share the file: the headroom covers what they write between two checks.
 */
/* the bytes allocated past the end of the file st describes */
static long long
log_room(const struct stat *st)
{
	return (long long)st->st_blocks * 512 - (long long)st->st_size;
}

static void
log_write(const char *line, size_t len)
{
	/* whether stderr is a regular file: it stays what it was for the process's life, so a
	 * pipe (the pod's log) is looked at once */
	static int regular = -1;
	struct stat st;
	ssize_t unused;

	if (regular != 0) {
		bool looked = fstat(STDERR_FILENO, &st) == 0;
		if (regular < 0 && looked)
			regular = S_ISREG(st.st_mode);
		if (regular == 1 && looked && log_room(&st) < LOG_HEADROOM_BYTES &&
		    fallocate(STDERR_FILENO, FALLOC_FL_KEEP_SIZE, st.st_size, LOG_RESERVE_BYTES) <
		        0 &&
		    (errno == ENOSPC || errno == EDQUOT) &&
		    /* no room for a whole line: none (a file system without fallocate is written
		     * as before) */
		    (fstat(STDERR_FILENO, &st) < 0 || log_room(&st) < (long long)len))
			return;
	}
	unused = write(STDERR_FILENO, line, len);
	(void)unused;
}

/* A line of its message, formatted (at most 1023 bytes of it), and its fields. */
static void __attribute__((format(printf, 3, 0)))
log_vline(enum log_level level, const char *fields, const char *fmt, va_list ap)
{
	char msg[1024];

	vsnprintf(msg, sizeof(msg), fmt, ap);
	log_line(level, fields, msg);
}

void
log_msg(enum log_level level, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	log_vline(level, NULL, fmt, ap);
	va_end(ap);
}

void
log_msg_fields(enum log_level level, const char *fields, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	log_vline(level, fields, fmt, ap);
	va_end(ap);
}

static void
log_line(enum log_level level, const char *fields, const char *msg)
{
	char ts[64];
	struct timespec now;
	struct tm tm;
	struct jsonw w;
	size_t len;
	char *line;

	clock_gettime(CLOCK_REALTIME, &now);
	gmtime_r(&now.tv_sec, &tm);
	strftime(ts, sizeof(ts), "%Y-%m-%dT%H:%M:%S", &tm);
	snprintf(ts + strlen(ts), sizeof(ts) - strlen(ts), ".%03ldZ", now.tv_nsec / 1000000);

	jsonw_init(&w);
	jsonw_lit(&w, "{\"time\":");
	jsonw_cstr(&w, ts);
	jsonw_lit(&w, ",\"level\":");
	jsonw_cstr(&w, log_level_string(level));
	jsonw_lit(&w, ",\"component\":");
	jsonw_cstr(&w, log_component);
	jsonw_lit(&w, ",\"pid\":");
	jsonw_int(&w, getpid());
	if (log_request_id[0]) {
		jsonw_lit(&w, ",\"requestId\":");
		jsonw_cstr(&w, log_request_id);
	}
	if (log_trace_id[0]) {
		jsonw_lit(&w, ",\"traceId\":");
		jsonw_cstr(&w, log_trace_id);
	}
	if (fields != NULL)
		jsonw_lit(&w, fields);
	jsonw_lit(&w, ",\"msg\":");
	jsonw_cstr(&w, msg); /* our own messages are ASCII */
	jsonw_lit(&w, "}\n");
	line = jsonw_take(&w, &len);
	if (line == NULL)
		return;
	log_write(line, len);
	free(line);
}
