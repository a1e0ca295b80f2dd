// The chat-template interpreter on its own: language features, HF whitespace rules, the
// trusted/untrusted tagging of strings, and clear refusals of what it does not support.
#include <gtest/gtest.h>

#include "deepinfer/recipe/jinja.h"

namespace deepinfer::recipe::jinja {
namespace {

Dict conversation() {
  List msgs;
  for (auto [r, c] : {std::pair{"system", "Be brief."}, {"user", "  Hi there  "}, {"assistant", "Hello"}})
    msgs.push_back(Value::dict({{"role", Value::data_str(r)}, {"content", Value::data_str(c)}}));
  return Dict{{"messages", Value::list(std::move(msgs))},
              {"add_generation_prompt", Value::boolean(true)},
              {"bos_token", Value::str(TaggedString::literal("<s>"))}};
}

std::string render(std::string_view src, const Dict& globals = conversation()) {
  auto t = Template::parse(src);
  EXPECT_TRUE(t.is_ok()) << t.status().message();
  if (!t.is_ok()) return "<parse error>";
  auto r = t->render(globals);
  EXPECT_TRUE(r.is_ok()) << r.status().message();
  return r.is_ok() ? r->text : "<render error>";
}

TEST(Jinja, LoopsAndConditions) {
  EXPECT_EQ(render("{% for m in messages %}{{ loop.index }}{{ m.role[0] }}{% if loop.first %}F{% elif loop.last %}L{% else %}-{% endif %}{% endfor %}"),
            "1sF2u-3aL");
  EXPECT_EQ(render("{{ messages[0]['role'] }}|{{ messages|length }}|{{ messages[1].content|trim }}|{{ messages[-1].content }}"),
            "system|3|Hi there|Hello");
  EXPECT_EQ(render("{% for m in messages[1:] %}{{ m.role }} {% endfor %}"), "user assistant ");
  EXPECT_EQ(render("{% for m in messages if m.role != 'system' %}{{ loop.index0 }}{{ m.role }}{% endfor %}"),
            "0user1assistant");
  EXPECT_EQ(render("{% for x in [] %}a{% else %}empty{% endfor %}"), "empty");
  EXPECT_EQ(render("{{ 2 * 3 ~ 1 }}"), "61");  // ~ binds tighter than + and looser than *
}

TEST(Jinja, ExpressionsSetAndNamespace) {
  EXPECT_EQ(render("{{ 'b' ~ 1 ~ true ~ none }}"), "b1TrueNone");
  EXPECT_EQ(render("{{ 1 + 2 * 3 }} {{ 7 // 2 }} {{ 7 % 3 }} {{ -2 + 5 }}"), "7 3 1 3");
  EXPECT_EQ(render("{% set x = 'out' %}{% for m in messages %}{% set x = 'in' %}{% endfor %}{{ x }}"), "out");
  EXPECT_EQ(render("{% set ns = namespace(n=0) %}{% for m in messages %}{% set ns.n = ns.n + 1 %}{% endfor %}{{ ns.n }}"), "3");
  EXPECT_EQ(render("{{ 'yes' if 'ell' in 'hello' else 'no' }} {{ 'x' not in 'abc' }} {{ not add_generation_prompt }}"),
            "yes True False");
  EXPECT_EQ(render("{{ undefined_thing is defined }} {{ messages is defined }} {{ none is none }} {{ x|default('d') }}"),
            "False True True d");
  EXPECT_EQ(render("{{ (1 == 1) and (2 != 2) }} {{ 0 or 'fallback' }}"), "False fallback");
  EXPECT_EQ(render("{{ '  a b '.strip() }}|{{ 'Hello'.startswith('He') }}|{{ 'a,b'.split(',')|join('+') }}|{{ 'ab'|upper }}"),
            "a b|True|a+b|AB");
  EXPECT_EQ(render("{{ {'k': [1, 'two']}|tojson }}"), "{\"k\": [1, \"two\"]}");  // Python's json.dumps
  EXPECT_EQ(render("{{ [1, {'a': 'x'}]|tojson(2) }}"), "[\n  1,\n  {\n    \"a\": \"x\"\n  }\n]");
  EXPECT_EQ(render("{{ messages[0].get('missing', 'dflt') }}"), "dflt");
}

TEST(Jinja, WhitespaceControlLikeHuggingFace) {
  // trim_blocks + lstrip_blocks, and explicit '-' markers.
  EXPECT_EQ(render("{% if true %}\n  a\n{% endif %}\nb"), "  a\nb");
  EXPECT_EQ(render("x  {%- if true -%}  y  {%- endif -%}  z"), "xyz");
  EXPECT_EQ(render("    {% if true %}a{% endif %}"), "a");
  EXPECT_EQ(render("x {{- ' y ' -}} z"), "x y z");
  EXPECT_EQ(render("{# comment #}\nv"), "v");
}

TEST(Jinja, TagsTrustedAndDataBytes) {
  auto t = Template::parse("<A>{{ messages[1].content }}{{ '<B>' + messages[0].role }}{{ bos_token }}");
  ASSERT_TRUE(t.is_ok());
  auto r = t->render(conversation());
  ASSERT_TRUE(r.is_ok());
  EXPECT_EQ(r->text, "<A>  Hi there  <B>system<s>");
  // Trusted: "<A>", "<B>", "<s>"; the message content and role are data.
  std::vector<std::pair<size_t, size_t>> want{{0, 3}, {15, 18}, {24, 27}};
  EXPECT_EQ(r->trusted, want);
  auto trimmed = Template::parse("{{ ('<X> ' + messages[1].content)|trim }}");
  auto r2 = trimmed->render(conversation());
  ASSERT_TRUE(r2.is_ok());
  EXPECT_EQ(r2->text, "<X>   Hi there");
  EXPECT_EQ(r2->trusted, (std::vector<std::pair<size_t, size_t>>{{0, 4}}));
}

TEST(Jinja, ErrorsAreClear) {
  auto raised = Template::parse("{{ raise_exception('roles must alternate') }}")->render({});
  ASSERT_FALSE(raised.is_ok());
  EXPECT_NE(raised.status().message().find("roles must alternate"), std::string::npos);

  auto macro = Template::parse("{% macro f() %}x{% endmacro %}");
  ASSERT_FALSE(macro.is_ok());
  EXPECT_EQ(macro.status().code(), StatusCode::kUnsupported);
  EXPECT_NE(macro.status().message().find("macro"), std::string::npos);

  auto filt = Template::parse("{{ 'a'|wordcount }}")->render({});
  ASSERT_FALSE(filt.is_ok());
  EXPECT_EQ(filt.status().code(), StatusCode::kUnsupported);

  EXPECT_FALSE(Template::parse("{% if x %}never closed").is_ok());
  EXPECT_FALSE(Template::parse("{{ 'unterminated }}").is_ok());
  EXPECT_FALSE(Template::parse("{{ 1.5 }}").is_ok());
  EXPECT_FALSE(Template::parse("{% endfor %}").is_ok());
  // Deep nesting is refused rather than overflowing the stack.
  EXPECT_FALSE(Template::parse("{{ " + std::string(100000, '(') + "1" + std::string(100000, ')') + " }}").is_ok());
  EXPECT_FALSE(Template::parse("{{ " + std::string(100000, '-') + "1 }}").is_ok());
  EXPECT_EQ(render("{{ not not true }} {{ --3 }}"), "True 3");
  std::string sum = "1";
  for (int i = 0; i < 100000; ++i) sum += "+1";
  EXPECT_FALSE(Template::parse("{{ " + sum + " }}").is_ok());
  std::string deep;
  for (int i = 0; i < 5000; ++i) deep += "{% if true %}";
  EXPECT_FALSE(Template::parse(deep).is_ok());
  // Garbage never crashes.
  for (std::string junk : {"{{", "{%", "{{ }}", "{% %}", "{{ a[ }}", "{{ a. }}", "{{ f( }}", "{% for %}",
                           "{% for x %}", "{% set %}", "{% if %}{% endif %}", "{{ 'a' 'b' }}", "{% elif x %}"})
    (void)Template::parse(junk);
}

}  // namespace
}  // namespace deepinfer::recipe::jinja
