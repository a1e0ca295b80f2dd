// The route handlers, one file per API family. Each reads its body, builds GenerationRequests,
// and answers with one JSON body or an SSE stream; errors are thrown as ApiError and shaped by
// the caller (http_server.cc) in the family's own error format.
#pragma once

#include <string>

#include "deepinfer/serve/server_context.h"

namespace httplib {
struct Request;
struct Response;
}  // namespace httplib

namespace deepinfer::serve {

void handle_chat_completions(const ServerContext& ctx, const httplib::Request& req, httplib::Response& res);
void handle_completions(const ServerContext& ctx, const httplib::Request& req, httplib::Response& res);
void handle_responses(const ServerContext& ctx, const httplib::Request& req, httplib::Response& res);
void handle_get_response(const ServerContext& ctx, const std::string& id, httplib::Response& res);
void handle_messages(const ServerContext& ctx, const httplib::Request& req, httplib::Response& res);
void handle_count_tokens(const ServerContext& ctx, const httplib::Request& req, httplib::Response& res);

// The chat page served at "/": one self-contained HTML document.
const std::string& chat_page_html();

}  // namespace deepinfer::serve
