// libcurl's easy and multi interfaces. Variadic calls go through the CCurlShim target.
#include <curl/curl.h>
