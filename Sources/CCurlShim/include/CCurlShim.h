#ifndef CCURLSHIM_H
#define CCURLSHIM_H

// Typed, non-variadic wrappers for libcurl's variadic setopt/getinfo calls, which Swift cannot import.
// One function per argument type; each returns libcurl's own CURLcode (or CURLMcode).
#include <curl/curl.h>
// The engine drives libcurl from an epoll set and is woken through an eventfd; Swift's Glibc module does not
// export these two headers, so they are made visible here.
#include <sys/epoll.h>
#include <sys/eventfd.h>

CURLcode ccurl_easy_setopt_long(CURL *handle, CURLoption option, long value);
CURLcode ccurl_easy_setopt_string(CURL *handle, CURLoption option, const char *value);
CURLcode ccurl_easy_setopt_pointer(CURL *handle, CURLoption option, void *value);
CURLcode ccurl_easy_setopt_slist(CURL *handle, CURLoption option, struct curl_slist *value);
CURLcode ccurl_easy_setopt_write_callback(CURL *handle, size_t (*callback)(char *, size_t, size_t, void *));
CURLcode ccurl_easy_setopt_header_callback(CURL *handle, size_t (*callback)(char *, size_t, size_t, void *));
CURLcode ccurl_easy_getinfo_long(CURL *handle, CURLINFO info, long *value);
CURLcode ccurl_easy_getinfo_double(CURL *handle, CURLINFO info, double *value);
CURLcode ccurl_easy_getinfo_pointer(CURL *handle, CURLINFO info, void **value);
CURLMcode ccurl_multi_setopt_long(CURLM *multi, CURLMoption option, long value);

/// libcurl's CURLMOPT_SOCKETFUNCTION signature: which events `socket` must be watched for (`what`: CURL_POLL_*).
typedef int (*ccurl_socket_callback)(CURL *easy, curl_socket_t socket, int what, void *context, void *socket_context);
/// libcurl's CURLMOPT_TIMERFUNCTION signature: call curl_multi_socket_action(CURL_SOCKET_TIMEOUT) after
/// `timeout_ms` (-1: no timer).
typedef int (*ccurl_timer_callback)(CURLM *multi, long timeout_ms, void *context);

/// Sets CURLMOPT_SOCKETFUNCTION and CURLMOPT_SOCKETDATA together; returns the first failure.
CURLMcode ccurl_multi_setopt_socket_callback(CURLM *multi, ccurl_socket_callback callback, void *context);
/// Sets CURLMOPT_TIMERFUNCTION and CURLMOPT_TIMERDATA together; returns the first failure.
CURLMcode ccurl_multi_setopt_timer_callback(CURLM *multi, ccurl_timer_callback callback, void *context);

/// CURLOPT_SOCKOPTFUNCTION callback: marks each socket libcurl opens close-on-exec (libcurl before 8.17 does not),
/// so that a child process never inherits, and keeps open, one of the engine's connections. Always returns
/// CURL_SOCKOPT_OK.
int ccurl_sockopt_close_on_exec(void *context, curl_socket_t socket, curlsocktype purpose);
/// Sets CURLOPT_SOCKOPTFUNCTION to ccurl_sockopt_close_on_exec.
CURLcode ccurl_easy_setopt_close_on_exec(CURL *handle);

#endif
