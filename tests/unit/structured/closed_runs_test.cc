// closed_runs: which byte-class positions lead on to a rule that takes every plain (or text)
// byte again, for ever, without ending. That a walker state built on them classifies every
// context as the token-by-token reference does is checked in context_classify_test.cc.
#include "deepinfer/structured/masks/closed_runs.h"

#include <gtest/gtest.h>

namespace deepinfer::structured {
namespace {

// The plain bytes as VocabTrie has them: printable ASCII but '"' and '\'.
ByteSet plain_bytes() {
  ByteSet s;
  s.set_range(0x20, 0x7E);
  s.bits['"' >> 6] &= ~(uint64_t{1} << ('"' & 63));
  s.bits['\\' >> 6] &= ~(uint64_t{1} << ('\\' & 63));
  return s;
}

ByteSet range(uint8_t lo, uint8_t hi) {
  ByteSet s;
  s.set_range(lo, hi);
  return s;
}

// Every byte from 0x20 on but '"' and '\': a JSON string body's bytes, UTF-8 unchecked.
ByteSet body_bytes() {
  ByteSet s = range(0x20, 0xFF);
  s.bits['"' >> 6] &= ~(uint64_t{1} << ('"' & 63));
  s.bits['\\' >> 6] &= ~(uint64_t{1} << ('\\' & 63));
  return s;
}

ByteSet without(ByteSet s, uint8_t b) {
  s.bits[b >> 6] &= ~(uint64_t{1} << (b & 63));
  return s;
}

Grammar build(GrammarBuilder& b, uint32_t root) {
  auto g = b.build(root);
  EXPECT_TRUE(g.is_ok()) << g.status().message();
  return g.is_ok() ? std::move(g).value() : Grammar{};
}

// ClosedRuns::after of element `offset` of alternative `alt` of rule `rule`.
uint8_t after(const Grammar& g, uint32_t rule, size_t alt, uint32_t offset = 0) {
  const uint32_t p = g.rule_alts.at(rule).at(alt) + offset;
  EXPECT_EQ(g.elements[p].kind, ElemKind::kBytes) << "rule " << rule << " alt " << alt;
  return ClosedRuns(g, plain_bytes()).after(p);
}

constexpr uint8_t kBoth = ClosedRuns::kPlain | ClosedRuns::kText;

TEST(ClosedRuns, StringBodyOfEveryByteIsClosedOverPlainAndText) {
  // root ::= '"' body;  body ::= [body bytes] body | '"'
  GrammarBuilder b;
  const uint32_t root = b.new_rule("root"), body = b.new_rule("body");
  b.add_alt(root, {b.byte('"'), GrammarBuilder::call(body)});
  b.add_alt(body, {b.bytes(body_bytes()), GrammarBuilder::call(body)});
  b.add_alt(body, {b.byte('"')});
  const Grammar g = build(b, root);
  EXPECT_EQ(after(g, body, 0), kBoth);
  EXPECT_EQ(after(g, root, 0), kBoth);  // the opening quote leads into the body
  EXPECT_EQ(after(g, body, 1), 0);      // the closing one ends it
}

TEST(ClosedRuns, AsciiOnlyBodyIsClosedOverPlainOnly) {
  GrammarBuilder b;
  const uint32_t body = b.new_rule("body");
  b.add_alt(body, {b.bytes(range(0x20, 0x7E)), GrammarBuilder::call(body)});
  b.add_alt(body, {b.byte('"')});
  const Grammar g = build(b, body);
  EXPECT_EQ(after(g, body, 0), ClosedRuns::kPlain);
}

// A name that must differ from "ab" (as json_schema/parts.cc's key_excluding builds it): the
// rules part ways on its letters, yet between them every byte still goes on. `b_alt` is
// reached by a tail call alone, and `after_ab` takes every byte at once.
struct PartingRules {
  Grammar g;
  uint32_t start, after_a, b_alt, after_ab;
};
PartingRules parting_rules() {
  GrammarBuilder b;
  const uint32_t start = b.new_rule("start"), after_a = b.new_rule("after_a"),
                 b_alt = b.new_rule("b_alt"), after_ab = b.new_rule("after_ab"),
                 rest = b.new_rule("rest");
  auto call = GrammarBuilder::call;
  b.add_alt(start, {b.byte('a'), call(after_a)});
  b.add_alt(start, {b.bytes(without(body_bytes(), 'a')), call(rest)});
  b.add_alt(start, {b.byte('"')});
  b.add_alt(after_a, {b.byte('b'), call(after_ab)});
  b.add_alt(after_a, {call(b_alt)});
  b.add_alt(b_alt, {b.bytes(without(body_bytes(), 'b')), call(rest)});
  b.add_alt(b_alt, {b.byte('"')});
  b.add_alt(after_ab, {b.bytes(body_bytes()), b.bytes(body_bytes()), call(rest)});
  b.add_alt(rest, {b.bytes(body_bytes()), call(rest)});
  b.add_alt(rest, {b.byte('"')});
  return {build(b, start), start, after_a, b_alt, after_ab};
}

TEST(ClosedRuns, RulesThatPartWaysOnLettersAreClosedTogether) {
  const auto [g, start, after_a, b_alt, after_ab] = parting_rules();
  EXPECT_EQ(after(g, start, 0), kBoth);
  EXPECT_EQ(after(g, start, 1), kBoth);
  EXPECT_EQ(after(g, after_a, 0), kBoth);
  EXPECT_EQ(after(g, b_alt, 0), kBoth);
  EXPECT_EQ(after(g, after_ab, 0), kBoth);  // across a second class that takes every byte
}

// loop ::= char loop | ;  char ::= [ascii] | multi-byte forms (as a JSON string's character
// rule has them): the 2-byte form only, all but the 4-byte ones, or all.
enum class Forms { kTwoByte, kNoFourByte, kAll };
struct CharLoop {
  uint32_t loop, ch;
};
CharLoop add_char_loop(GrammarBuilder& b, const ByteSet& ascii, Forms forms) {
  const uint32_t loop = b.new_rule("loop"), ch = b.new_rule("char");
  b.add_alt(loop, {GrammarBuilder::call(ch), GrammarBuilder::call(loop)});
  b.add_alt(loop, {});
  b.add_alt(ch, {b.bytes(ascii)});
  const ByteSet cont = range(0x80, 0xBF);
  b.add_alt(ch, {b.bytes(range(0xC2, 0xDF)), b.bytes(cont)});
  if (forms == Forms::kTwoByte) return {loop, ch};
  b.add_alt(ch, {b.byte(0xE0), b.bytes(range(0xA0, 0xBF)), b.bytes(cont)});
  b.add_alt(ch, {b.bytes(range(0xE1, 0xEC)), b.bytes(cont), b.bytes(cont)});
  b.add_alt(ch, {b.byte(0xED), b.bytes(range(0x80, 0x9F)), b.bytes(cont)});
  b.add_alt(ch, {b.bytes(range(0xEE, 0xEF)), b.bytes(cont), b.bytes(cont)});
  if (forms == Forms::kNoFourByte) return {loop, ch};
  b.add_alt(ch, {b.byte(0xF0), b.bytes(range(0x90, 0xBF)), b.bytes(cont), b.bytes(cont)});
  b.add_alt(ch, {b.bytes(range(0xF1, 0xF3)), b.bytes(cont), b.bytes(cont), b.bytes(cont)});
  b.add_alt(ch, {b.byte(0xF4), b.bytes(range(0x80, 0x8F)), b.bytes(cont), b.bytes(cont)});
  return {loop, ch};
}

TEST(ClosedRuns, CharacterLoopIsClosedOverPlainThroughItsCaller) {
  // The character rule's ASCII alternative ends its rule, and the loop goes on where the
  // call returns. A lone lead byte does not go on, so the loop is not closed over text
  // bytes; one whose character rule never takes 'q' is not closed at all.
  GrammarBuilder b;
  auto call = GrammarBuilder::call;
  const uint32_t root = b.new_rule("root");
  const CharLoop any = add_char_loop(b, without(range(0x20, 0x7F), '"'), Forms::kTwoByte);
  const CharLoop no_q = add_char_loop(b, without(range(0x20, 0x7E), 'q'), Forms::kTwoByte);
  b.add_alt(root, {b.byte('"'), call(any.loop), b.byte('"')});
  b.add_alt(root, {b.byte('\''), call(no_q.loop), b.byte('\'')});
  const Grammar g = build(b, root);
  EXPECT_EQ(after(g, any.ch, 0), 0);  // alone, it ends: what follows is its caller's
  ClosedRuns runs(g, plain_bytes());
  EXPECT_EQ(runs.after_return(g.rule_alts[any.loop][0]), ClosedRuns::kPlain);
  EXPECT_EQ(runs.after(g.rule_alts[root][0]), ClosedRuns::kPlain);  // the opening quote
  EXPECT_EQ(runs.after_return(g.rule_alts[no_q.loop][0]), 0);
  EXPECT_EQ(runs.after(g.rule_alts[root][1]), 0);
}

TEST(ClosedRuns, UnicodeStringBodyIsClosedOverTextByCharacters) {
  // A loop over every multi-byte form takes every text token, character by character
  // (kTextChars), though not every run of high bytes (kText). Without the 4-byte forms it
  // does not.
  GrammarBuilder b;
  auto call = GrammarBuilder::call;
  const uint32_t root = b.new_rule("root");
  const ByteSet ascii = without(range(0x20, 0x7F), '"');
  const CharLoop all = add_char_loop(b, ascii, Forms::kAll);
  const CharLoop bmp = add_char_loop(b, ascii, Forms::kNoFourByte);
  b.add_alt(root, {b.byte('"'), call(all.loop), b.byte('"')});
  b.add_alt(root, {b.byte('\''), call(bmp.loop), b.byte('\'')});
  const Grammar g = build(b, root);
  ClosedRuns runs(g, plain_bytes());
  const uint8_t by_characters = ClosedRuns::kPlain | ClosedRuns::kTextChars;
  EXPECT_EQ(runs.after_return(g.rule_alts[all.loop][0]), by_characters);
  EXPECT_EQ(runs.after(g.rule_alts[root][0]), by_characters);
  EXPECT_TRUE(runs.takes_every_multibyte_character(all.ch));
  EXPECT_EQ(runs.after(g.rule_alts[root][1]), ClosedRuns::kPlain);
  EXPECT_FALSE(runs.takes_every_multibyte_character(bmp.ch));
  // Each alternative's leads: the 2-byte form's C2-DF; none for a lone continuation class or
  // the ASCII alternative.
  EXPECT_EQ(runs.multibyte_leads(g.rule_alts[all.ch][1]), range(0xC2, 0xDF));
  EXPECT_TRUE(runs.multibyte_leads(g.rule_alts[all.ch][1] + 1).empty());
  EXPECT_TRUE(runs.multibyte_leads(g.rule_alts[all.ch][0]).empty());
  EXPECT_FALSE(ClosedRuns::every_lead(range(0xC2, 0xEF)));
  EXPECT_TRUE(ClosedRuns::every_lead(range(0xC2, 0xF4)));
}

TEST(ClosedRuns, AMissingByteAnEndOrACallThatReturnsIsNotClosed) {
  // `gap` never takes 'a'; `ends` finishes its rule (what follows is not known); `returns`
  // calls a rule that ends after one byte, and what follows that call takes 'x' only;
  // `narrow` passes through a class short of the plain bytes before its tail call.
  GrammarBuilder b;
  auto call = GrammarBuilder::call;
  const uint32_t root = b.new_rule("root"), gap = b.new_rule("gap"), ends = b.new_rule("ends"),
                 returns = b.new_rule("returns"), narrow = b.new_rule("narrow");
  for (uint32_t r : {gap, ends, returns, narrow}) b.add_alt(root, {call(r)});
  b.add_alt(gap, {b.bytes(without(body_bytes(), 'a')), call(gap)});
  b.add_alt(gap, {b.byte('"')});
  b.add_alt(ends, {b.bytes(body_bytes())});
  b.add_alt(returns, {b.bytes(body_bytes()), call(ends), b.byte('x')});
  b.add_alt(narrow, {b.bytes(body_bytes()), b.bytes(range('a', 'z')), call(narrow)});
  b.add_alt(narrow, {b.byte('"')});
  const Grammar g = build(b, root);
  EXPECT_EQ(after(g, gap, 0), 0);
  EXPECT_EQ(after(g, ends, 0), 0);
  EXPECT_EQ(after(g, returns, 0), 0);
  EXPECT_EQ(after(g, narrow, 0), 0);
}

TEST(ClosedRuns, ARuleThatNeverEndsMayGrowTheStack) {
  // nest ::= [body] nest 'x' | '"' never ends on body bytes (each pushes a frame), so what
  // follows its call never matters.
  GrammarBuilder b;
  auto call = GrammarBuilder::call;
  const uint32_t root = b.new_rule("root"), nest = b.new_rule("nest");
  b.add_alt(root, {b.byte('<'), call(nest), b.byte('>')});
  b.add_alt(nest, {b.bytes(body_bytes()), call(nest), b.byte('x')});
  b.add_alt(nest, {b.byte('"')});
  const Grammar g = build(b, root);
  EXPECT_EQ(after(g, nest, 0), kBoth);
  EXPECT_EQ(after(g, root, 0), kBoth);
}

TEST(ClosedRuns, ALossSpreadsBackAlongTheChain) {
  // c takes only x-z, so b (which leads every byte into c) and a (into b) are not closed
  // either: the fixpoint must withdraw them one after another.
  GrammarBuilder b;
  auto call = GrammarBuilder::call;
  const uint32_t a = b.new_rule("a"), bb = b.new_rule("b"), c = b.new_rule("c");
  b.add_alt(a, {b.bytes(body_bytes()), call(bb)});
  b.add_alt(bb, {b.bytes(body_bytes()), call(c)});
  b.add_alt(c, {b.bytes(range('x', 'z')), call(a)});
  b.add_alt(c, {b.byte('"')});
  const Grammar g = build(b, a);
  EXPECT_EQ(after(g, a, 0), 0);
  EXPECT_EQ(after(g, bb, 0), 0);
  EXPECT_EQ(after(g, c, 0), 0);
}

// hub's two ways on both reach nar, which takes only x-z: nothing here is closed. mid is
// looked at before nar has shrunk, so one pass over the rules is not enough.
struct LateLoss {
  Grammar g;
  uint32_t root, hub, mid;
};
LateLoss late_loss() {
  GrammarBuilder b;
  auto call = GrammarBuilder::call;
  const uint32_t root = b.new_rule("root"), hub = b.new_rule("hub"), nar = b.new_rule("nar"),
                 mid = b.new_rule("mid");
  b.add_alt(root, {b.byte('"'), call(hub)});
  b.add_alt(hub, {b.bytes(body_bytes()), call(nar)});
  b.add_alt(hub, {b.bytes(body_bytes()), call(mid)});
  b.add_alt(mid, {b.bytes(body_bytes()), call(nar)});
  b.add_alt(nar, {b.bytes(range('x', 'z')), call(hub)});
  b.add_alt(nar, {b.byte('"')});
  return {build(b, root), root, hub, mid};
}

TEST(ClosedRuns, ALossFoundLateIsCarriedBack) {
  const auto [g, root, hub, mid] = late_loss();
  EXPECT_EQ(after(g, root, 0), 0);
  EXPECT_EQ(after(g, hub, 1), 0);
  EXPECT_EQ(after(g, mid, 0), 0);
}

// narrow takes x-z only; asked about first (it comes first), it is known not closed when
// the question about root reaches it through user.
Grammar known_loss() {
  GrammarBuilder b;
  auto call = GrammarBuilder::call;
  const uint32_t narrow = b.new_rule("narrow"), user = b.new_rule("user"),
                 root = b.new_rule("root");
  b.add_alt(narrow, {b.bytes(range('x', 'z')), call(narrow)});
  b.add_alt(narrow, {b.byte('"')});
  b.add_alt(user, {b.bytes(body_bytes()), call(narrow)});
  b.add_alt(root, {b.byte('"'), call(user)});
  return build(b, root);
}

TEST(ClosedRuns, AnswersKeptFromEarlierQuestionsAgree) {
  // One ClosedRuns asked about every position, first to last and last to first, answers as
  // a fresh one asked about each alone (rules answered earlier are reused, not recomputed).
  for (const Grammar& g : {parting_rules().g, late_loss().g, known_loss()}) {
    std::vector<uint32_t> positions;
    for (uint32_t p = 0; p < g.elements.size(); ++p)
      if (g.elements[p].kind == ElemKind::kBytes) positions.push_back(p);
    std::vector<uint8_t> fresh;
    for (uint32_t p : positions) fresh.push_back(ClosedRuns(g, plain_bytes()).after(p));
    ClosedRuns forward(g, plain_bytes()), backward(g, plain_bytes());
    for (size_t i = 0; i < positions.size(); ++i) {
      EXPECT_EQ(forward.after(positions[i]), fresh[i]) << positions[i];
      const size_t j = positions.size() - 1 - i;
      EXPECT_EQ(backward.after(positions[j]), fresh[j]) << positions[j];
    }
  }
}

}  // namespace
}  // namespace deepinfer::structured
