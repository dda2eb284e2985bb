#include "CCurlShim.h"

#include <fcntl.h>

CURLcode ccurl_easy_setopt_long(CURL *handle, CURLoption option, long value) {
    return curl_easy_setopt(handle, option, value);
}

CURLcode ccurl_easy_setopt_string(CURL *handle, CURLoption option, const char *value) {
    return curl_easy_setopt(handle, option, value);
}

CURLcode ccurl_easy_setopt_pointer(CURL *handle, CURLoption option, void *value) {
    return curl_easy_setopt(handle, option, value);
}

CURLcode ccurl_easy_setopt_slist(CURL *handle, CURLoption option, struct curl_slist *value) {
    return curl_easy_setopt(handle, option, value);
}

CURLcode ccurl_easy_setopt_write_callback(CURL *handle, size_t (*callback)(char *, size_t, size_t, void *)) {
    return curl_easy_setopt(handle, CURLOPT_WRITEFUNCTION, callback);
}

CURLcode ccurl_easy_setopt_header_callback(CURL *handle, size_t (*callback)(char *, size_t, size_t, void *)) {
    return curl_easy_setopt(handle, CURLOPT_HEADERFUNCTION, callback);
}

CURLcode ccurl_easy_getinfo_long(CURL *handle, CURLINFO info, long *value) {
    return curl_easy_getinfo(handle, info, value);
}

CURLcode ccurl_easy_getinfo_double(CURL *handle, CURLINFO info, double *value) {
    return curl_easy_getinfo(handle, info, value);
}

CURLcode ccurl_easy_getinfo_pointer(CURL *handle, CURLINFO info, void **value) {
    return curl_easy_getinfo(handle, info, value);
}

CURLMcode ccurl_multi_setopt_long(CURLM *multi, CURLMoption option, long value) {
    return curl_multi_setopt(multi, option, value);
}

CURLMcode ccurl_multi_setopt_socket_callback(CURLM *multi, ccurl_socket_callback callback, void *context) {
    CURLMcode result = curl_multi_setopt(multi, CURLMOPT_SOCKETFUNCTION, callback);
    if (result != CURLM_OK) {
        return result;
    }
    return curl_multi_setopt(multi, CURLMOPT_SOCKETDATA, context);
}

CURLMcode ccurl_multi_setopt_timer_callback(CURLM *multi, ccurl_timer_callback callback, void *context) {
    CURLMcode result = curl_multi_setopt(multi, CURLMOPT_TIMERFUNCTION, callback);
    if (result != CURLM_OK) {
        return result;
    }
    return curl_multi_setopt(multi, CURLMOPT_TIMERDATA, context);
}

int ccurl_sockopt_close_on_exec(void *context, curl_socket_t socket, curlsocktype purpose) {
    (void)context;
    (void)purpose;
    int flags = fcntl(socket, F_GETFD);
    if (flags >= 0) {
        (void)fcntl(socket, F_SETFD, flags | FD_CLOEXEC);
    }
    return CURL_SOCKOPT_OK;
}

CURLcode ccurl_easy_setopt_close_on_exec(CURL *handle) {
    return curl_easy_setopt(handle, CURLOPT_SOCKOPTFUNCTION, ccurl_sockopt_close_on_exec);
}
