// A small Jinja interpreter for chat templates: enough of the language for the templates
// models ship (for/if/set, loop variables, filters, tests, a few methods), refusing the rest
// with an error that names the construct. Rendering mirrors HF apply_chat_template
// (trim_blocks and lstrip_blocks on).
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "deepinfer/base/status.h"
#include "deepinfer/recipe/jinja_value.h"

namespace deepinfer::recipe::jinja {

struct Node;

class Template {
 public:
  static Result<Template> parse(std::string_view source);
  Template();
  ~Template();
  Template(Template&&) noexcept;
  Template& operator=(Template&&) noexcept;

  // `globals` maps names (messages, add_generation_prompt, bos_token, ...) to values.
  // Errors: raise_exception() from the template, or an unsupported operation at run time.
  Result<TaggedString> render(const Dict& globals) const;

 private:
  std::shared_ptr<const Node> root_;
};

}  // namespace deepinfer::recipe::jinja
