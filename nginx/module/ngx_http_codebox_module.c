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
 */

#include <ngx_config.h>
#include <ngx_core.h>
#include <ngx_http.h>

typedef struct {
	ngx_msec_t body_deadline;
} ngx_http_codebox_loc_conf_t;

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

static ngx_command_t ngx_http_codebox_commands[] = {

    {ngx_string("codebox_body_deadline"), NGX_HTTP_MAIN_CONF | NGX_HTTP_SRV_CONF | NGX_CONF_TAKE1,
     ngx_conf_set_msec_slot, NGX_HTTP_LOC_CONF_OFFSET,
     offsetof(ngx_http_codebox_loc_conf_t, body_deadline), NULL},

    ngx_null_command};

static ngx_http_module_t ngx_http_codebox_module_ctx = {
    NULL,                  /* preconfiguration */
    ngx_http_codebox_init, /* postconfiguration */

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

	return conf;
}

static char *
ngx_http_codebox_merge_loc_conf(ngx_conf_t *cf, void *parent, void *child)
{
	ngx_http_codebox_loc_conf_t *prev = parent;
	ngx_http_codebox_loc_conf_t *conf = child;

	ngx_conf_merge_msec_value(conf->body_deadline, prev->body_deadline, 0);

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

	return NGX_OK;
}
