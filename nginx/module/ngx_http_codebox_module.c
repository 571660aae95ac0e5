/*
 * codebox: a bound on the total time a request body may take to arrive.
 *
 * nginx's client_body_timeout bounds the gap between two reads, so a client that sends one
 * byte every few seconds may hold its connection for as long as it likes. This module arms
 * one timer per request that has a body, as soon as its header is read (the post-read
 * phase). If nginx is still reading the body when the timer fires, the request is answered
 * 408 through the server's error_page for 408 (codebox's JSON body), exactly as nginx
 * answers a body that grows past client_max_body_size mid-stream: the rest of the body is
 * not read, the connection is not kept alive, and it closes after a lingering read. The
 * request never reached the pool: with fastcgi_request_buffering on, nginx opens the
 * upstream connection only once the whole body is in hand. Once it is, the timer does
 * nothing: the run's own time is bounded by the pool.
 *
 *     codebox_body_deadline  20s;    # http, server; 0 (the default) turns it off
 *
 * Server-level only: the post-read phase runs before a location is chosen, so the server's
 * value is the one in force. HTTP/2 requests read their bodies differently and are left
 * alone (codebox does not enable HTTP/2).
 *
 * And bearer tokens: with a token file, a request must carry `Authorization: Bearer <token>`
 * with one of its tokens, else it is answered 401 (through the server's error_page for 401)
 * with `WWW-Authenticate: Bearer realm="codebox"`. The file holds one token a line (blank
 * lines and lines starting with # are skipped), each at least 16 bytes. It is read with the
 * configuration (a bad file stops nginx from starting or reloading), and again by each nginx
 * worker when it changes: before a request is checked, at most once a second, the worker
 * stat()s the path (a Kubernetes Secret's update swaps the symlink it resolves through; an
 * editor's rename or an in-place rewrite changes the inode, size, mtime or ctime) and reads
 * it anew if anything differs. A changed file that cannot be read, or that is malformed, is
 * logged (error) and the tokens read last stay in force, as a failed reload keeps the old
 * configuration; so rotation needs no reload or restart. The comparison takes the same time
 * whatever the bytes given: every token is compared in full, with no early exit. Internal redirects
 * (error pages) are not checked again. The check runs before the location's own `return`s,
 * and before limit_conn counts the request.
 *
 *     codebox_auth_tokens  /etc/codebox/tokens/tokens;   # http, server, location; off: none
 *
 * And session ids kept out of the logs: a session's id is its one credential where tokens are
 * off, and it travels in the URI (/sessions/{id}/...). $codebox_log_uri is $uri with the path
 * segment after "/sessions/" replaced by "h:" and the first 8 hex digits of its SHA-256, the
 * name the pool's own log lines give a session (fcgi/run/session.h, session_log_name()); the
 * access log's "uri" is that. The error log's `request: "..."` (the request line nginx adds to
 * every line about a request) is redacted the same way.
 *
 * And W3C Trace Context's headers as a request sent them: $codebox_traceparent is the value
 * of its one traceparent header, empty where it has none or several (several are invalid, and
 * nginx before 1.23 gives $http_traceparent the first alone); $codebox_tracestate is its
 * tracestate headers joined with "," (the spec lets a list be split across headers). Neither
 * is validated here: nginx.conf's maps take only what their strict expressions match.
 */

#include <ngx_config.h>
#include <ngx_core.h>
#include <ngx_http.h>
#include <ngx_sha1.h>

#include <openssl/sha.h>

/* A token file and the tokens last read from it, shared by every location that inherits it;
 * each nginx worker has its own copy (after fork) and refreshes it on its own. */
typedef struct {
	ngx_str_t name;       /* the full path, NUL-terminated */
	ngx_array_t *tokens;  /* of ngx_str_t, in pool (or the configuration's pool) */
	ngx_pool_t *pool;     /* the memory of a file read after start; NULL: the configuration's */
	ngx_file_info_t seen; /* what stat() said of the file whose tokens these are (or that was
	                         refused) */
	time_t checked;       /* when the worker last looked (ngx_time()) */
} ngx_http_codebox_tokens_t;

typedef struct {
	ngx_msec_t body_deadline;
	ngx_http_codebox_tokens_t *tokens; /* NULL: no check (off, or unset and inherited) */
	ngx_flag_t tokens_set;
} ngx_http_codebox_loc_conf_t;

#define CODEBOX_TOKEN_MIN 16
#define CODEBOX_TOKEN_FILE_MAX 65536

typedef struct {
	ngx_http_request_t *request;
	ngx_event_t deadline;
} ngx_http_codebox_ctx_t;

static ngx_int_t ngx_http_codebox_post_read_handler(ngx_http_request_t *r);
static void ngx_http_codebox_deadline_handler(ngx_event_t *ev);
static void ngx_http_codebox_cleanup(void *data);
static void *ngx_http_codebox_create_loc_conf(ngx_conf_t *cf);
static char *ngx_http_codebox_merge_loc_conf(ngx_conf_t *cf, void *parent, void *child);
static ngx_int_t ngx_http_codebox_init(ngx_conf_t *cf);
static char *ngx_http_codebox_auth_tokens(ngx_conf_t *cf, ngx_command_t *cmd, void *conf);
static ngx_int_t ngx_http_codebox_access_handler(ngx_http_request_t *r);
static ngx_int_t ngx_http_codebox_add_variables(ngx_conf_t *cf);
static u_char *ngx_http_codebox_log_error(ngx_http_request_t *r, ngx_http_request_t *sr,
                                          u_char *buf, size_t len);

/* nginx's own writer of a request's part of an error line (the same for every request) */
static ngx_http_log_handler_pt ngx_http_codebox_next_log_error;

static ngx_command_t ngx_http_codebox_commands[] = {

    {ngx_string("codebox_body_deadline"), NGX_HTTP_MAIN_CONF | NGX_HTTP_SRV_CONF | NGX_CONF_TAKE1,
     ngx_conf_set_msec_slot, NGX_HTTP_LOC_CONF_OFFSET,
     offsetof(ngx_http_codebox_loc_conf_t, body_deadline), NULL},

    {ngx_string("codebox_auth_tokens"),
     NGX_HTTP_MAIN_CONF | NGX_HTTP_SRV_CONF | NGX_HTTP_LOC_CONF | NGX_CONF_TAKE1,
     ngx_http_codebox_auth_tokens, NGX_HTTP_LOC_CONF_OFFSET, 0, NULL},

    ngx_null_command};

static ngx_http_module_t ngx_http_codebox_module_ctx = {
    ngx_http_codebox_add_variables, /* preconfiguration */
    ngx_http_codebox_init,          /* postconfiguration */

    NULL, /* create main configuration */
    NULL, /* init main configuration */

    NULL, /* create server configuration */
    NULL, /* merge server configuration */

    ngx_http_codebox_create_loc_conf, /* create location configuration */
    ngx_http_codebox_merge_loc_conf   /* merge location configuration */
};

ngx_module_t ngx_http_codebox_module = {NGX_MODULE_V1,
                                        &ngx_http_codebox_module_ctx, /* module context */
                                        ngx_http_codebox_commands,    /* module directives */
                                        NGX_HTTP_MODULE,              /* module type */
                                        NULL,                         /* init master */
                                        NULL,                         /* init module */
                                        NULL,                         /* init process */
                                        NULL,                         /* init thread */
                                        NULL,                         /* exit thread */
                                        NULL,                         /* exit process */
                                        NULL,                         /* exit master */
                                        NGX_MODULE_V1_PADDING};

static ngx_int_t
ngx_http_codebox_post_read_handler(ngx_http_request_t *r)
{
	ngx_pool_cleanup_t *cln;
	ngx_http_codebox_ctx_t *ctx;
	ngx_http_codebox_loc_conf_t *clcf;

	clcf = ngx_http_get_module_loc_conf(r, ngx_http_codebox_module);

	/* the error log's lines about this request name its session by a hash (the file's top) */
	if (r->log_handler != ngx_http_codebox_log_error) {
		ngx_http_codebox_next_log_error = r->log_handler;
		r->log_handler = ngx_http_codebox_log_error;
	}

	/* the post-read phase runs once per client request: internal redirects and subrequests
	 * begin at the server's rewrite phase, so the timer is armed once */
	if (clcf->body_deadline == 0) {
		return NGX_DECLINED;
	}

#if (NGX_HTTP_V2)
	if (r->stream) {
		return NGX_DECLINED;
	}
#endif

	if (r->headers_in.content_length_n <= 0 && !r->headers_in.chunked) {
		return NGX_DECLINED;
	}

	ctx = ngx_pcalloc(r->pool, sizeof(ngx_http_codebox_ctx_t));
	if (ctx == NULL) {
		return NGX_HTTP_INTERNAL_SERVER_ERROR;
	}

	cln = ngx_pool_cleanup_add(r->pool, 0);
	if (cln == NULL) {
		return NGX_HTTP_INTERNAL_SERVER_ERROR;
	}

	ctx->request = r;
	ctx->deadline.handler = ngx_http_codebox_deadline_handler;
	ctx->deadline.data = ctx;
	ctx->deadline.log = r->connection->log;
	/* a graceful shutdown waits for the request, not for this timer */
	ctx->deadline.cancelable = 1;

	cln->handler = ngx_http_codebox_cleanup;
	cln->data = ctx;

	ngx_add_timer(&ctx->deadline, clcf->body_deadline);

	return NGX_DECLINED;
}

static void
ngx_http_codebox_deadline_handler(ngx_event_t *ev)
{
	ngx_int_t rc;
	ngx_connection_t *c;
	ngx_http_request_t *r;
	ngx_http_codebox_ctx_t *ctx;
	ngx_http_codebox_loc_conf_t *clcf;

	ctx = ev->data;
	r = ctx->request;
	c = r->connection;

	if (r->request_body == NULL || r->request_body->rest == 0) {
		/* the body is in hand (or reading it never began): nothing to bound */
		return;
	}

	ngx_http_set_log_request(c->log, r);

	clcf = ngx_http_get_module_loc_conf(r, ngx_http_codebox_module);

	ngx_log_error(NGX_LOG_INFO, c->log, 0,
	              "client request body not complete within "
	              "codebox_body_deadline (%M ms)",
	              clcf->body_deadline);

	/*
	 * As for a body past client_max_body_size mid-stream: stop reading it, answer with the
	 * error page, and close the connection after a lingering read, so the client, still
	 * sending, reads the answer instead of a reset. 408 itself is not passed to
	 * ngx_http_finalize_request(), which would close the connection without a response.
	 */
	r->read_event_handler = ngx_http_block_reading;
	r->keepalive = 0;
	r->lingering_close = 1;

	if (c->read->timer_set) {
		ngx_del_timer(c->read);
	}

	rc = ngx_http_special_response_handler(r, NGX_HTTP_REQUEST_TIME_OUT);

	ngx_http_finalize_request(r, rc);

	ngx_http_run_posted_requests(c);
}

static void
ngx_http_codebox_cleanup(void *data)
{
	ngx_http_codebox_ctx_t *ctx = data;

	if (ctx->deadline.timer_set) {
		ngx_del_timer(&ctx->deadline);
	}
}

static void *
ngx_http_codebox_create_loc_conf(ngx_conf_t *cf)
{
	ngx_http_codebox_loc_conf_t *conf;

	conf = ngx_pcalloc(cf->pool, sizeof(ngx_http_codebox_loc_conf_t));
	if (conf == NULL) {
		return NULL;
	}

	conf->body_deadline = NGX_CONF_UNSET_MSEC;
	/* tokens: NULL and tokens_set 0 (inherit) */

	return conf;
}

static char *
ngx_http_codebox_merge_loc_conf(ngx_conf_t *cf, void *parent, void *child)
{
	ngx_http_codebox_loc_conf_t *prev = parent;
	ngx_http_codebox_loc_conf_t *conf = child;

	ngx_conf_merge_msec_value(conf->body_deadline, prev->body_deadline, 0);
	if (!conf->tokens_set) {
		conf->tokens = prev->tokens;
		conf->tokens_set = prev->tokens_set;
	}

	return NGX_CONF_OK;
}

static ngx_int_t
ngx_http_codebox_init(ngx_conf_t *cf)
{
	ngx_http_handler_pt *h;
	ngx_http_core_main_conf_t *cmcf;

	cmcf = ngx_http_conf_get_module_main_conf(cf, ngx_http_core_module);

	h = ngx_array_push(&cmcf->phases[NGX_HTTP_POST_READ_PHASE].handlers);
	if (h == NULL) {
		return NGX_ERROR;
	}

	*h = ngx_http_codebox_post_read_handler;

	/* the rewrite phase, not access: a location's `return` (404, 405) runs there, and a
	 * request without a token learns nothing, not even which routes exist. Its handlers run
	 * last-registered first, so this one, registered after the rewrite module's, is first */
	h = ngx_array_push(&cmcf->phases[NGX_HTTP_REWRITE_PHASE].handlers);
	if (h == NULL) {
		return NGX_ERROR;
	}

	*h = ngx_http_codebox_access_handler;

	return NGX_OK;
}

/*
 * Reads the token file open at fd (fi: its fstat()) into a new array in pool. NULL when it
 * cannot, with why a message for "%V" (the file's name) and line, and bad_line the line of a
 * short token (0 for none).
 */
static ngx_array_t *
ngx_http_codebox_tokens_read(ngx_file_t *file, ngx_file_info_t *fi, ngx_pool_t *pool,
                             const char **why, ngx_uint_t *bad_line)
{
	ngx_array_t *tokens;
	ngx_str_t *t;
	u_char *buf, *p, *end, *eol;
	ssize_t n;
	size_t size;
	ngx_uint_t line = 0;

	*bad_line = 0;
	if (!ngx_is_file(fi) || ngx_file_size(fi) > CODEBOX_TOKEN_FILE_MAX) {
		*why = "is not a regular file of at most 65536 bytes";
		return NULL;
	}
	size = (size_t)ngx_file_size(fi);
	buf = ngx_pnalloc(pool, size + 1);
	n = buf ? ngx_read_file(file, buf, size, 0) : NGX_ERROR;
	if (n != (ssize_t)size) {
		*why = "cannot be read";
		return NULL;
	}
	tokens = ngx_array_create(pool, 4, sizeof(ngx_str_t));
	if (tokens == NULL) {
		*why = "cannot be read (out of memory)";
		return NULL;
	}
	for (p = buf, end = buf + size; p < end; p = eol + 1) {
		eol = ngx_strlchr(p, end, '\n');
		if (eol == NULL) {
			eol = end;
		}
		line++;
		n = eol - p;
		while (n > 0 && (p[n - 1] == '\r' || p[n - 1] == ' ' || p[n - 1] == '\t')) {
			n--;
		}
		if (n == 0 || p[0] == '#') {
			continue;
		}
		if (n < CODEBOX_TOKEN_MIN) {
			*why = "has a token shorter than 16 bytes";
			*bad_line = line;
			return NULL;
		}
		t = ngx_array_push(tokens);
		if (t == NULL) {
			*why = "cannot be read (out of memory)";
			return NULL;
		}
		t->data = p;
		t->len = (size_t)n;
	}
	if (tokens->nelts == 0) {
		*why = "holds no token (every request would be refused)";
		return NULL;
	}
	return tokens;
}

/* whether a and b describe the same file with the same contents, as far as stat() tells */
static ngx_uint_t
ngx_http_codebox_same_file(const ngx_file_info_t *a, const ngx_file_info_t *b)
{
	return a->st_dev == b->st_dev && a->st_ino == b->st_ino && a->st_size == b->st_size &&
	       a->st_mtim.tv_sec == b->st_mtim.tv_sec && a->st_mtim.tv_nsec == b->st_mtim.tv_nsec &&
	       a->st_ctim.tv_sec == b->st_ctim.tv_sec && a->st_ctim.tv_nsec == b->st_ctim.tv_nsec;
}

/*
 * Reads the token file again when it changed (at most one look a second, per nginx worker).
 * A changed file that cannot be used is logged, and the tokens in force stay.
 */
static void
ngx_http_codebox_tokens_refresh(ngx_http_codebox_tokens_t *tk, ngx_log_t *log)
{
	ngx_file_t file;
	ngx_file_info_t fi;
	ngx_pool_t *pool;
	ngx_array_t *tokens;
	const char *why = "cannot be opened";
	ngx_uint_t bad_line = 0;

	if (tk->checked == ngx_time()) {
		return;
	}
	tk->checked = ngx_time();
	if (ngx_file_info(tk->name.data, &fi) == NGX_FILE_ERROR) {
		/* gone, or not this worker's to read (the master read it at start, maybe as
		 * root): say so once, keep the tokens */
		if (tk->seen.st_ino != 0) {
			ngx_log_error(
			    NGX_LOG_ERR, log, ngx_errno,
			    "codebox_auth_tokens: this nginx worker cannot look at \"%V\", "
			    "so a change needs a reload to be seen; the tokens read before "
			    "stay in force",
			    &tk->name);
			ngx_memzero(&tk->seen, sizeof(tk->seen));
		}
		return;
	}
	if (ngx_http_codebox_same_file(&fi, &tk->seen)) {
		return;
	}
	ngx_memzero(&file, sizeof(ngx_file_t));
	file.name = tk->name;
	file.log = log;
	pool = ngx_create_pool(CODEBOX_TOKEN_FILE_MAX / 4, log);
	if (pool == NULL) {
		return;
	}
	tokens = NULL;
	file.fd = ngx_open_file(tk->name.data, NGX_FILE_RDONLY, NGX_FILE_OPEN, 0);
	if (file.fd == NGX_INVALID_FILE) {
		why = "cannot be opened by this nginx worker";
	} else {
		/* what is read is described by the open file, not by the path looked at above */
		if (ngx_fd_info(file.fd, &fi) != NGX_FILE_ERROR) {
			tokens = ngx_http_codebox_tokens_read(&file, &fi, pool, &why, &bad_line);
		}
		ngx_close_file(file.fd);
	}
	/* the same file is not tried again until it changes again */
	tk->seen = fi;
	if (tokens == NULL) {
		if (bad_line > 0) {
			ngx_log_error(NGX_LOG_ERR, log, 0,
			              "codebox_auth_tokens: the token on line %ui of \"%V\" is "
			              "shorter than %d bytes; the tokens read before stay in force",
			              bad_line, &tk->name, CODEBOX_TOKEN_MIN);
		} else {
			ngx_log_error(NGX_LOG_ERR, log, 0,
			              "codebox_auth_tokens: \"%V\" %s; the tokens read before stay "
			              "in force",
			              &tk->name, why);
		}
		ngx_destroy_pool(pool);
		return;
	}
	if (tk->pool != NULL) {
		ngx_destroy_pool(tk->pool);
	}
	tk->pool = pool;
	tk->tokens = tokens;
	ngx_log_error(NGX_LOG_NOTICE, log, 0, "codebox_auth_tokens: \"%V\" read again: %ui tokens",
	              &tk->name, tokens->nelts);
}

/* codebox_auth_tokens FILE | off: the tokens, read now (and again when the file changes) */
static char *
ngx_http_codebox_auth_tokens(ngx_conf_t *cf, ngx_command_t *cmd, void *conf)
{
	ngx_http_codebox_loc_conf_t *clcf = conf;
	ngx_str_t *value = cf->args->elts, name;
	ngx_http_codebox_tokens_t *tk;
	ngx_file_t file;
	ngx_file_info_t fi;
	const char *why = "cannot be read";
	ngx_uint_t bad_line = 0;

	(void)cmd;
	if (clcf->tokens_set) {
		return "is duplicate";
	}
	clcf->tokens_set = 1;
	if (value[1].len == 3 && ngx_strncmp(value[1].data, "off", 3) == 0) {
		clcf->tokens = NULL;
		return NGX_CONF_OK;
	}
	name = value[1];
	/* the full name, NUL-terminated (ngx_conf_full_name() allocates it with its NUL) */
	if (ngx_conf_full_name(cf->cycle, &name, 1) != NGX_OK) {
		return NGX_CONF_ERROR;
	}
	tk = ngx_pcalloc(cf->pool, sizeof(ngx_http_codebox_tokens_t));
	if (tk == NULL) {
		return NGX_CONF_ERROR;
	}
	tk->name = name;
	ngx_memzero(&file, sizeof(ngx_file_t));
	file.name = name;
	file.log = cf->log;
	file.fd = ngx_open_file(name.data, NGX_FILE_RDONLY, NGX_FILE_OPEN, 0);
	if (file.fd == NGX_INVALID_FILE) {
		ngx_conf_log_error(NGX_LOG_EMERG, cf, ngx_errno,
		                   "codebox_auth_tokens: cannot open \"%V\"", &name);
		return NGX_CONF_ERROR;
	}
	if (ngx_fd_info(file.fd, &fi) != NGX_FILE_ERROR) {
		tk->tokens = ngx_http_codebox_tokens_read(&file, &fi, cf->pool, &why, &bad_line);
	}
	ngx_close_file(file.fd);
	if (tk->tokens == NULL) {
		if (bad_line > 0) {
			ngx_conf_log_error(
			    NGX_LOG_EMERG, cf, 0,
			    "codebox_auth_tokens: the token on line %ui of \"%V\" is "
			    "shorter than %d bytes",
			    bad_line, &name, CODEBOX_TOKEN_MIN);
		} else {
			ngx_conf_log_error(NGX_LOG_EMERG, cf, 0, "codebox_auth_tokens: \"%V\" %s",
			                   &name, why);
		}
		return NGX_CONF_ERROR;
	}
	tk->seen = fi;
	tk->checked = ngx_time();
	clcf->tokens = tk;
	return NGX_CONF_OK;
}

/* Whether given is one of tokens, in time that depends on the tokens' lengths only. */
static ngx_uint_t
ngx_http_codebox_token_ok(ngx_array_t *tokens, u_char *given, size_t len)
{
	ngx_str_t *t = tokens->elts;
	ngx_uint_t found = 0, i;
	size_t k;

	for (i = 0; i < tokens->nelts; i++) {
		u_char diff = (u_char)(t[i].len != len);
		for (k = 0; k < t[i].len; k++) {
			diff |= t[i].data[k] ^ (len ? given[k % len] : 0);
		}
		found |= (diff == 0);
	}
	return found;
}

static ngx_int_t
ngx_http_codebox_access_handler(ngx_http_request_t *r)
{
	ngx_http_codebox_loc_conf_t *clcf;
	ngx_table_elt_t *auth, *h;
	u_char *v;
	size_t len;

	clcf = ngx_http_get_module_loc_conf(r, ngx_http_codebox_module);
	if (clcf->tokens == NULL || r->internal || r != r->main) {
		return NGX_DECLINED;
	}
	ngx_http_codebox_tokens_refresh(clcf->tokens, r->connection->log);
	auth = r->headers_in.authorization;
	if (auth != NULL && auth->value.len > 7 &&
	    ngx_strncasecmp(auth->value.data, (u_char *)"Bearer ", 7) == 0) {
		v = auth->value.data + 7;
		len = auth->value.len - 7;
		while (len > 0 && *v == ' ') {
			v++;
			len--;
		}
		if (ngx_http_codebox_token_ok(clcf->tokens->tokens, v, len)) {
			return NGX_DECLINED;
		}
	}
	h = ngx_list_push(&r->headers_out.headers);
	if (h == NULL) {
		return NGX_HTTP_INTERNAL_SERVER_ERROR;
	}
	h->hash = 1;
	ngx_str_set(&h->key, "WWW-Authenticate");
	if (auth == NULL) {
		ngx_str_set(&h->value, "Bearer realm=\"codebox\"");
	} else {
		ngx_str_set(&h->value, "Bearer realm=\"codebox\", error=\"invalid_token\"");
		ngx_log_error(NGX_LOG_INFO, r->connection->log, 0,
		              "codebox_auth_tokens: an invalid bearer token");
	}
	r->headers_out.www_authenticate = h;
	return NGX_HTTP_UNAUTHORIZED;
}

/*
 * $codebox_token_id: the SHA-1 (hex) of the bearer token a request carries where tokens are
 * checked, else empty. The pool binds a session to it (session.h): it never sees a token.
 */
static ngx_int_t
ngx_http_codebox_token_id_variable(ngx_http_request_t *r, ngx_http_variable_value_t *v,
                                   uintptr_t data)
{
	ngx_http_codebox_loc_conf_t *clcf;
	ngx_table_elt_t *auth;
	ngx_sha1_t sha;
	u_char digest[20], *p, *t;
	size_t len;

	(void)data;
	v->not_found = 1;
	clcf = ngx_http_get_module_loc_conf(r, ngx_http_codebox_module);
	auth = r->headers_in.authorization;
	if (clcf->tokens == NULL || auth == NULL || auth->value.len <= 7 ||
	    ngx_strncasecmp(auth->value.data, (u_char *)"Bearer ", 7) != 0) {
		return NGX_OK;
	}
	t = auth->value.data + 7;
	len = auth->value.len - 7;
	while (len > 0 && *t == ' ') {
		t++;
		len--;
	}
	ngx_sha1_init(&sha);
	ngx_sha1_update(&sha, t, len);
	ngx_sha1_final(digest, &sha);
	p = ngx_pnalloc(r->pool, 40);
	if (p == NULL) {
		return NGX_ERROR;
	}
	ngx_hex_dump(p, digest, 20);
	v->data = p;
	v->len = 40;
	v->valid = 1;
	v->no_cacheable = 0;
	v->not_found = 0;
	return NGX_OK;
}

/*
 * in, for a log: the path segment after its first "/sessions/" (up to a '/', a '?', a space or
 * the end) replaced by "h:" and the first 8 hex digits of the segment's SHA-256. Returns 1
 * with *out newly made in r's pool, 0 with *out = *in when there is no such segment, or
 * NGX_ERROR (out of memory).
 */
static ngx_int_t
ngx_http_codebox_redact(ngx_http_request_t *r, const ngx_str_t *in, ngx_str_t *out)
{
	static const char prefix[] = "/sessions/";
	u_char *at, *seg, *end, *last, *p, md[SHA256_DIGEST_LENGTH];

	*out = *in;
	if (in->data == NULL || in->len <= sizeof(prefix) - 1) {
		return 0;
	}
	at = ngx_strnstr(in->data, (char *)prefix, in->len);
	if (at == NULL) {
		return 0;
	}
	last = in->data + in->len;
	seg = at + sizeof(prefix) - 1;
	for (end = seg; end < last && *end != '/' && *end != '?' && *end != ' '; end++) {
		/* the segment */
	}
	if (end == seg) {
		return 0;
	}
	SHA256(seg, (size_t)(end - seg), md);
	p = ngx_pnalloc(r->pool, (size_t)(seg - in->data) + 10 + (size_t)(last - end));
	if (p == NULL) {
		return NGX_ERROR;
	}
	out->data = p;
	p = ngx_cpymem(p, in->data, seg - in->data);
	p = ngx_cpymem(p, "h:", 2);
	p = ngx_hex_dump(p, md, 4);
	p = ngx_cpymem(p, end, last - end);
	out->len = (size_t)(p - out->data);
	return 1;
}

/* $codebox_log_uri: $uri as the logs show it (ngx_http_codebox_redact()) */
static ngx_int_t
ngx_http_codebox_log_uri_variable(ngx_http_request_t *r, ngx_http_variable_value_t *v,
                                  uintptr_t data)
{
	ngx_str_t uri;

	(void)data;
	if (r->uri.data == NULL) {
		v->not_found = 1;
		return NGX_OK;
	}
	if (ngx_http_codebox_redact(r, &r->uri, &uri) == NGX_ERROR) {
		return NGX_ERROR;
	}
	v->data = uri.data;
	v->len = uri.len;
	v->valid = 1;
	v->no_cacheable = 1; /* an internal redirect changes $uri */
	v->not_found = 0;
	return NGX_OK;
}

/*
 * $codebox_traceparent (data 0): the one traceparent header's value, or not found (none, or
 * more than one); $codebox_tracestate (data 1): every tracestate header's value, joined by ",".
 */
static ngx_int_t
ngx_http_codebox_trace_variable(ngx_http_request_t *r, ngx_http_variable_value_t *v, uintptr_t data)
{
	static ngx_str_t names[] = {ngx_string("traceparent"), ngx_string("tracestate")};
	ngx_str_t name = names[data];
	ngx_list_part_t *part = &r->headers_in.headers.part;
	ngx_table_elt_t *h = part->elts, *found = NULL;
	ngx_uint_t i, n = 0;
	size_t len = 0;
	u_char *p = NULL;

	v->not_found = 1;
	/* twice: count and measure, then join (tracestate) */
	for (int pass = 0; pass < (data ? 2 : 1); pass++) {
		part = &r->headers_in.headers.part;
		h = part->elts;
		for (i = 0;; i++) {
			if (i >= part->nelts) {
				if (part->next == NULL) {
					break;
				}
				part = part->next;
				h = part->elts;
				i = 0;
			}
			if (h[i].key.len != name.len ||
			    ngx_strncasecmp(h[i].key.data, name.data, name.len) != 0) {
				continue;
			}
			if (pass == 0) {
				found = &h[i];
				n++;
				len += h[i].value.len + 1;
			} else {
				if (p != v->data) {
					*p++ = ',';
				}
				p = ngx_cpymem(p, h[i].value.data, h[i].value.len);
			}
		}
		if (n == 0 || (data == 0 && n > 1)) {
			return NGX_OK;
		}
		if (pass == 0 && data) {
			p = ngx_pnalloc(r->pool, len);
			if (p == NULL) {
				return NGX_ERROR;
			}
			v->data = p;
		}
	}
	if (data) {
		v->len = (unsigned)(p - v->data);
	} else {
		v->data = found->value.data;
		v->len = (unsigned)found->value.len;
	}
	v->valid = 1;
	v->no_cacheable = 0;
	v->not_found = 0;
	return NGX_OK;
}

/* A request's part of an error line, nginx's own, with its request line redacted as the
 * access log's URI is (or left out when that cannot be done) */
static u_char *
ngx_http_codebox_log_error(ngx_http_request_t *r, ngx_http_request_t *sr, u_char *buf, size_t len)
{
	ngx_str_t line = r->request_line, safe;
	u_char *p;

	if (r->pool == NULL || ngx_http_codebox_redact(r, &line, &safe) == NGX_ERROR) {
		ngx_str_null(&safe);
	}
	r->request_line = safe;
	p = ngx_http_codebox_next_log_error(r, sr, buf, len);
	r->request_line = line;
	return p;
}

static ngx_int_t
ngx_http_codebox_add_variables(ngx_conf_t *cf)
{
	static ngx_str_t name = ngx_string("codebox_token_id");
	static ngx_str_t log_uri = ngx_string("codebox_log_uri");
	static ngx_str_t trace[] = {ngx_string("codebox_traceparent"),
	                            ngx_string("codebox_tracestate")};
	ngx_http_variable_t *var = ngx_http_add_variable(cf, &name, NGX_HTTP_VAR_NOCACHEABLE);

	if (var == NULL) {
		return NGX_ERROR;
	}
	var->get_handler = ngx_http_codebox_token_id_variable;
	var = ngx_http_add_variable(cf, &log_uri, NGX_HTTP_VAR_NOCACHEABLE);
	if (var == NULL) {
		return NGX_ERROR;
	}
	var->get_handler = ngx_http_codebox_log_uri_variable;
	for (uintptr_t i = 0; i < 2; i++) {
		var = ngx_http_add_variable(cf, &trace[i], 0);
		if (var == NULL) {
			return NGX_ERROR;
		}
		var->get_handler = ngx_http_codebox_trace_variable;
		var->data = i;
	}
	return NGX_OK;
}
