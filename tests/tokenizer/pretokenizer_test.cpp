// The hand-written split patterns on the cases where regex semantics are
// subtle: the optional leading space, whitespace runs before a word ("\s+(?!\S)"
// gives back one space), newline runs, 1-3 digit groups, case-insensitive
// contractions, o200k's case split and "/" handling, and invalid bytes.
#include "tokenizer/pretokenizer.hpp"

#include <gtest/gtest.h>

#include "tokenizer/unicode_class.hpp"

namespace meshloom::tokenizer {
namespace {

using Pieces = std::vector<std::string_view>;

Pieces gpt2(std::string_view s) { return split_pieces(SplitPattern::kGpt2, s); }
Pieces cl100k(std::string_view s) { return split_pieces(SplitPattern::kCl100k, s); }
Pieces o200k(std::string_view s) { return split_pieces(SplitPattern::kO200k, s); }

TEST(tokenizer, SplitGpt2) {
  EXPECT_EQ(gpt2("Hello world"), (Pieces{"Hello", " world"}));
  EXPECT_EQ(gpt2("I'm don't THEY'RE"), (Pieces{"I", "'m", " don", "'t", " THEY", "'", "RE"}));
  EXPECT_EQ(gpt2("a  b"), (Pieces{"a", " ", " b"}));
  EXPECT_EQ(gpt2("a \n b"), (Pieces{"a", " \n", " b"}));
  EXPECT_EQ(gpt2("x   "), (Pieces{"x", "   "}));
  EXPECT_EQ(gpt2("12345 abc"), (Pieces{"12345", " abc"}));
  EXPECT_EQ(gpt2("  'll"), (Pieces{" ", " '", "ll"}));
  EXPECT_EQ(gpt2("\t\tx"), (Pieces{"\t", "\t", "x"}));
  EXPECT_EQ(gpt2("Привет мир"), (Pieces{"Привет", " мир"}));
  EXPECT_EQ(gpt2("a\u00a0b"), (Pieces{"a", "\u00a0", "b"}));  // NBSP is \s
  EXPECT_EQ(gpt2("x!?) y"), (Pieces{"x", "!?)", " y"}));
  EXPECT_EQ(gpt2(""), Pieces{});
}

TEST(tokenizer, SplitCl100k) {
  EXPECT_EQ(cl100k("I'M HERE's"), (Pieces{"I", "'M", " HERE", "'s"}));
  EXPECT_EQ(cl100k("it'\u017f"), (Pieces{"it", "'\u017f"}));  // long s folds to s
  EXPECT_EQ(cl100k("1234567"), (Pieces{"123", "456", "7"}));
  EXPECT_EQ(cl100k("a\n\n  b"), (Pieces{"a", "\n\n", " ", " b"}));
  EXPECT_EQ(cl100k("x.\n\ny"), (Pieces{"x", ".\n\n", "y"}));
  EXPECT_EQ(cl100k("(hello ((hello"), (Pieces{"(hello", " ((", "hello"}));
  EXPECT_EQ(cl100k("\thello"), (Pieces{"\thello"}));
  EXPECT_EQ(cl100k("x  \n"), (Pieces{"x", "  \n"}));
  EXPECT_EQ(cl100k("x \n y"), (Pieces{"x", " \n", " y"}));
  EXPECT_EQ(cl100k("\r\nword"), (Pieces{"\r\n", "word"}));
}

TEST(tokenizer, SplitO200k) {
  EXPECT_EQ(o200k("helloWorld HTTPServer"), (Pieces{"hello", "World", " HTTPServer"}));
  EXPECT_EQ(o200k("HELLO world"), (Pieces{"HELLO", " world"}));
  EXPECT_EQ(o200k("don't STOP'S"), (Pieces{"don't", " STOP'S"}));
  EXPECT_EQ(o200k("1234567"), (Pieces{"123", "456", "7"}));
  EXPECT_EQ(o200k("a/b//c"), (Pieces{"a", "/b", "//", "c"}));
  EXPECT_EQ(o200k("x.\n/"), (Pieces{"x", ".\n/"}));
  EXPECT_EQ(o200k("e\u0301te"), (Pieces{"e\u0301te"}));  // a mark joins the word
}

TEST(tokenizer, SplitKeepsInvalidBytesAsPunctuation) {
  EXPECT_EQ(gpt2("ab\xff\xfe cd"), (Pieces{"ab", "\xff\xfe", " cd"}));
  EXPECT_EQ(cl100k("ab\xff\xfe cd"), (Pieces{"ab", "\xff\xfe", " cd"}));
  EXPECT_EQ(o200k("ab\xff\xfe cd"), (Pieces{"ab", "\xff\xfe", " cd"}));
  // A truncated sequence at the end is one byte per piece step, never a read past the end.
  EXPECT_EQ(gpt2("x\xe4\xbd"), (Pieces{"x", "\xe4\xbd"}));
}

TEST(tokenizer, UnicodeClasses) {
  using namespace unicode;
  EXPECT_EQ(class_of('a'), kLetter | kLowerish);
  EXPECT_EQ(class_of('Q'), kLetter | kUpperish);
  EXPECT_EQ(class_of(0x4F60), kLetter | kUpperish | kLowerish);  // 你 (Lo)
  EXPECT_EQ(class_of(0x01C5), kLetter | kUpperish);              // ǅ (Lt)
  EXPECT_EQ(class_of(0x0301), kUpperish | kLowerish);            // combining acute (Mn)
  EXPECT_EQ(class_of(0x0663), kNumber);                          // Arabic-Indic 3
  EXPECT_EQ(class_of(0x216B), kNumber);                          // Roman numeral 12 (Nl)
  EXPECT_EQ(class_of(0x3000), kSpace);
  EXPECT_EQ(class_of(0x0085), kSpace);  // NEL: White_Space, as in tiktoken
  EXPECT_EQ(class_of(0xFEFF), 0);       // BOM: not White_Space
  EXPECT_EQ(class_of('\n'), kSpace | kNewline);
  EXPECT_EQ(class_of(0x1F44D), 0);           // emoji: symbol
  const uint8_t bad[] = {0xED, 0xA0, 0x80};  // an encoded surrogate
  EXPECT_EQ(decode(bad, 3).len, 1);
  EXPECT_EQ(decode(bad, 3).cls, 0);
}

// Unicode 15.1 and 16.0 code points take their Unicode 16.0 class, as in
// tiktoken's regex crate, even from an ICU that predates them (ICU 72).
TEST(tokenizer, UnicodeClassesAreUnicode16) {
  using namespace unicode;
  EXPECT_EQ(class_of(0x13460), kLetter | kUpperish | kLowerish);  // Egyptian hieroglyph (16.0, Lo)
  EXPECT_EQ(class_of(0x2EBF0), kLetter | kUpperish | kLowerish);  // CJK Extension I (15.1, Lo)
  EXPECT_EQ(class_of(0x1C89), kLetter | kUpperish);               // Cyrillic capital TJE (16.0, Lu)
  EXPECT_EQ(class_of(0x1C8A), kLetter | kLowerish);               // Cyrillic small tje (16.0, Ll)
  EXPECT_EQ(class_of(0x0897), kUpperish | kLowerish);             // Arabic pepet (16.0, Mn)
  EXPECT_EQ(class_of(0x10D40), kNumber);                          // Garay digit zero (16.0, Nd)
  EXPECT_EQ(class_of(0x1CC00), 0);  // legacy computing symbol (16.0, So): punctuation
  EXPECT_EQ(class_of(0x143FB), 0);  // unassigned in 16.0
  EXPECT_EQ(o200k("\U00013460,z"), (Pieces{"\U00013460", ",z"}));
  EXPECT_EQ(o200k("\U0002EBF0's"), (Pieces{"\U0002EBF0's"}));
  EXPECT_EQ(cl100k("\U00010D40\U00010D41\U00010D42\U00010D43"),
            (Pieces{"\U00010D40\U00010D41\U00010D42", "\U00010D43"}));
}

}  // namespace
}  // namespace meshloom::tokenizer
