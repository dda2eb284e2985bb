#ifndef CCURLSHIM_H
#define CCURLSHIM_H

// Typed, non-variadic wrappers for libcurl's variadic setopt/getinfo calls, which Swift cannot import.
// One function per argument type; each returns libcurl's own CURLcode.
#include <curl/curl.h>

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

#endif
