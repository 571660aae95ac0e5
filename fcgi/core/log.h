/*
 * log.h - one JSON object per line on stderr, carrying the current request id.
 */
#ifndef CODEBOX_LOG_H
#define CODEBOX_LOG_H

enum log_level {
	LOG_DEBUG,
	LOG_INFO,
	LOG_WARN,
	LOG_ERROR,
};

/* Names the process in every line ("pool", "worker"). The string must live forever. */
void log_set_component(const char *component);

/* The request id that later lines carry, or NULL for none. Copied (at most 128 bytes). */
void log_set_request_id(const char *id);

/* The W3C trace id that later lines carry (traceId), or NULL for none. Copied (32 hex). */
void log_set_trace_id(const char *id);

void log_msg(enum log_level level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* log_msg() with fields of the line's own before msg: fields is JSON members, each written
 * as ,"key":value (e.g. by jsonw), so that a log pipeline reads them as data. */
void log_msg_fields(enum log_level level, const char *fields, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#endif
