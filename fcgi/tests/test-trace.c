/* Unit tests for trace.c: W3C traceparent parsing, the request's trace, the export's knob. */
#include "run/trace.h"
#include "tap.h"

#include <stdlib.h>

#define TID "4bf92f3577b34da6a3ce929d0e0e4736"
#define PID "00f067aa0ba902b7"

static bool
valid(const char *h)
{
	struct trace_ctx t = {0};

	return trace_parse(h, &t) == 0;
}

int
main(void)
{
	struct trace_ctx t = {0};
	char why[256];

	ok(trace_parse("00-" TID "-" PID "-01", &t) == 0 && strcmp(t.trace_id, TID) == 0 &&
	       strcmp(t.parent_id, PID) == 0 && t.flags == 1,
	   "version 00: the trace id, the parent id and the flags");
	ok(valid("01-" TID "-" PID "-09") && valid("cc-" TID "-" PID "-00-what-ever"),
	   "a later version: its first four fields, then nothing or '-...'");
	ok(!valid("00-" TID "-" PID "-01-x") && !valid("00-" TID "-" PID "-01 "),
	   "version 00 has nothing after its flags");
	ok(!valid("ff-" TID "-" PID "-01"), "version ff is invalid");
	ok(!valid("01-" TID "-" PID "-01x"), "a later version: more only after a '-'");
	ok(!valid("00-4BF92F3577B34DA6A3CE929D0E0E4736-" PID "-01") &&
	       !valid("00-" TID "-00F067AA0BA902B7-01") && !valid("0A-" TID "-" PID "-01") &&
	       !valid("00-" TID "-" PID "-0A"),
	   "hex is lowercase");
	ok(!valid("00-00000000000000000000000000000000-" PID "-01") &&
	       !valid("00-" TID "-0000000000000000-01"),
	   "neither id is all zeros");
	ok(!valid("00-" TID "-" PID "-1") && !valid("00-" TID "a-" PID "-01") &&
	       !valid("00-" TID "-" PID "0-01") && !valid("00_" TID "_" PID "_01") &&
	       !valid("garbage") && !valid("") && !valid(NULL) && !valid("0g-" TID "-" PID "-01"),
	   "wrong lengths, separators, garbage, nothing");
	memset(&t, 0, sizeof(t));
	ok(trace_parse("zz", &t) < 0 && t.trace_id[0] == '\0', "an invalid header leaves t alone");

	trace_set_request("00-" TID "-" PID "-03", "b7ad6b7169203331", "rojo=1");
	ok(trace_current() != NULL && strcmp(trace_current()->span_id, "b7ad6b7169203331") == 0 &&
	       strcmp(trace_current()->state, "rojo=1") == 0 && trace_current()->flags == 3,
	   "the request's trace: nginx's span id and tracestate");
	trace_set_request("00-" TID "-" PID "-03", "B7AD6B7169203331", NULL);
	ok(trace_current() == NULL, "a span id that is not 16 lowercase hex: no trace");
	trace_set_request("00-" TID "-" PID "-03", "b7ad6b7169203331", "a=\x01");
	ok(trace_current() != NULL && trace_current()->state[0] == '\0',
	   "a tracestate that is not printable ASCII is dropped");
	trace_clear_request();
	ok(trace_current() == NULL, "cleared after the request");

	unsetenv("CODEBOX_OTLP_ENDPOINT");
	ok(trace_export_setup(why, sizeof(why)) == 0, "no endpoint: export off");
	setenv("CODEBOX_OTLP_ENDPOINT", "http://127.0.0.1:4318/v1/traces", 1);
	ok(trace_export_setup(why, sizeof(why)) == 0, "an http URL with an address and a port");
	setenv("CODEBOX_OTLP_ENDPOINT", "http://[::1]:4318/v1/traces", 1);
	ok(trace_export_setup(why, sizeof(why)) == 0, "an IPv6 address");
	static const char *bad[] = {"https://127.0.0.1/v1/traces",     "http://127.0.0.1:4318",
	                            "http://127.0.0.1:43a8/v1/traces", "http:///v1/traces",
	                            "http://[::1/v1/traces",           "127.0.0.1:4318/v1/traces"};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		setenv("CODEBOX_OTLP_ENDPOINT", bad[i], 1);
		ok(trace_export_setup(why, sizeof(why)) < 0 && strstr(why, "CODEBOX_OTLP_ENDPOINT"),
		   "refused: %s", bad[i]);
	}
	return tap_done();
}
