// Document readers on small real-shaped inputs: a text folder, a single file,
// JSON Lines with bad lines and invalid UTF-8, tar / tar.gz / tar.xz archives
// (written here with libarchive), corrupt inputs; and the UTF-8 repair rule.
#include "data/documents.hpp"

#include <archive.h>
#include <archive_entry.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <utility>

#include "base/utf8.hpp"
#include "tests/common/test_util.hpp"

namespace meshloom::data {
namespace {

using test::TempDir;
using test::write_file;

// ------------------------------------------------------------------ UTF-8

const std::string kFFFD = "\xEF\xBF\xBD";

std::pair<std::string, size_t> fixed(std::string s) {
  const size_t n = sanitize_utf8(&s);
  return {s, n};
}

TEST(Utf8, ValidTextIsUnchanged) {
  for (const std::string& s : std::vector<std::string>{
           "", "plain ascii, long enough to take the 8-byte fast path......", "caf\xC3\xA9",
           "\xE2\x82\xAC 20", "\xF0\x9F\x98\x80 emoji", "\xF4\x8F\xBF\xBF", kFFFD}) {
    EXPECT_EQ(fixed(s), std::make_pair(s, size_t{0})) << s;
    EXPECT_EQ(valid_utf8_prefix(s), s.size());
  }
}

// Expected outputs are Python's bytes.decode("utf-8", "replace").
TEST(Utf8, ReplacesMaximalSubparts) {
  EXPECT_EQ(fixed("\x80"), std::make_pair(kFFFD, size_t{1}));
  EXPECT_EQ(fixed("a\xC3"), std::make_pair("a" + kFFFD, size_t{1}));
  EXPECT_EQ(fixed("\xE2\x82"), std::make_pair(kFFFD, size_t{1}));  // truncated: one
  EXPECT_EQ(fixed("\xE2\x82x"), std::make_pair(kFFFD + "x", size_t{1}));
  EXPECT_EQ(fixed("\xF0\x90\x80"), std::make_pair(kFFFD, size_t{1}));
  EXPECT_EQ(fixed("\xED\xA0\x80"), std::make_pair(kFFFD + kFFFD + kFFFD, size_t{3}));  // surrogate
  EXPECT_EQ(fixed("\xC0\xAF"), std::make_pair(kFFFD + kFFFD, size_t{2}));              // overlong
  EXPECT_EQ(fixed("\xE0\x80\x80"), std::make_pair(kFFFD + kFFFD + kFFFD, size_t{3}));
  EXPECT_EQ(fixed("\xF4\x90\x80\x80").second, 4u);  // above U+10FFFF
  EXPECT_EQ(fixed("\xFF"), std::make_pair(kFFFD, size_t{1}));
  EXPECT_EQ(fixed("\xE1\x80\xE2\xF0\x91\x92\xF1\xBF\x41"),
            std::make_pair(kFFFD + kFFFD + kFFFD + kFFFD + "A", size_t{4}));
  EXPECT_EQ(valid_utf8_prefix("abcdefghij\xFFxyz"), 10u);
}

// ------------------------------------------------------------------ helpers

std::vector<Document> read_all(DocumentReader& r) {
  std::vector<Document> out;
  Document d;
  while (r.next(&d)) out.push_back(d);
  return out;
}

std::vector<std::string> names(const std::vector<Document>& docs) {
  std::vector<std::string> out;
  for (const auto& d : docs) out.push_back(d.name);
  return out;
}

ReaderOptions opts(config::SourceFormat f, std::string glob = "") {
  ReaderOptions o;
  o.format = f;
  o.glob = std::move(glob);
  return o;
}

// Writes a tar archive with libarchive; filter "none", "gzip" or "xz".
// Members: (name, content); a name ending in '/' is a folder, "link->target"
// a symbolic link.
void write_tar(const std::string& path, const std::string& filter,
               const std::vector<std::pair<std::string, std::string>>& members) {
  struct archive* a = archive_write_new();
  if (filter == "gzip") archive_write_add_filter_gzip(a);
  if (filter == "xz") archive_write_add_filter_xz(a);
  archive_write_set_format_pax_restricted(a);
  ASSERT_EQ(archive_write_open_filename(a, path.c_str()), ARCHIVE_OK) << archive_error_string(a);
  for (const auto& [name, content] : members) {
    struct archive_entry* e = archive_entry_new();
    const size_t arrow = name.find("->");
    if (arrow != std::string::npos) {
      archive_entry_set_pathname(e, name.substr(0, arrow).c_str());
      archive_entry_set_filetype(e, AE_IFLNK);
      archive_entry_set_symlink(e, name.substr(arrow + 2).c_str());
      archive_entry_set_perm(e, 0777);
    } else if (name.back() == '/') {
      archive_entry_set_pathname(e, name.c_str());
      archive_entry_set_filetype(e, AE_IFDIR);
      archive_entry_set_perm(e, 0755);
    } else {
      archive_entry_set_pathname(e, name.c_str());
      archive_entry_set_filetype(e, AE_IFREG);
      archive_entry_set_perm(e, 0644);
      archive_entry_set_size(e, static_cast<la_int64_t>(content.size()));
    }
    ASSERT_EQ(archive_write_header(a, e), ARCHIVE_OK) << archive_error_string(a);
    if (!content.empty()) archive_write_data(a, content.data(), content.size());
    archive_entry_free(e);
  }
  archive_write_close(a);
  archive_write_free(a);
}

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// ------------------------------------------------------------------ text

TEST(TextReader, FolderRecursiveSortedWithGlob) {
  TempDir dir;
  std::filesystem::create_directories(dir.file("docs/library"));
  std::filesystem::create_directories(dir.file("docs/a_tutorial"));
  write_file(dir.file("docs/index.rst.txt"), "Index\n=====\n");
  write_file(dir.file("docs/library/os.rst.txt"), "The os module.\n");
  write_file(dir.file("docs/a_tutorial/intro.rst.txt"), "Intro \xFF\xFE text\n");  // Latin-1 junk
  write_file(dir.file("docs/library/empty.rst.txt"), "");
  write_file(dir.file("docs/library/image.png"), "\x89PNG not text");
  write_file(dir.file("docs/conf.py"), "x = 1\n");

  DocumentReader r({dir.file("docs")}, opts(config::SourceFormat::text, "*.rst.txt"));
  EXPECT_EQ(r.num_files(), 4u);  // the .png and .py are filtered out
  const auto docs = read_all(r);
  EXPECT_EQ(names(docs), (std::vector<std::string>{dir.file("docs/a_tutorial/intro.rst.txt"),
                                                   dir.file("docs/index.rst.txt"),
                                                   dir.file("docs/library/os.rst.txt")}));
  EXPECT_EQ(docs[0].text, "Intro " + kFFFD + kFFFD + " text\n");
  EXPECT_EQ(docs[2].text, "The os module.\n");
  const InputReport& rep = r.report();
  EXPECT_EQ(rep.documents, 3u);
  EXPECT_EQ(rep.empty, 1u);
  EXPECT_EQ(rep.invalid_utf8_documents, 1u);
  EXPECT_EQ(rep.invalid_utf8_sequences, 2u);
  EXPECT_EQ(rep.unreadable, 0u);
  EXPECT_EQ(r.total_bytes(), 12u + 15u + 14u + 0u);
  EXPECT_EQ(r.consumed_bytes(), r.total_bytes());
}

TEST(TextReader, SingleFileAndMultipleInputsInOrder) {
  TempDir dir;
  write_file(dir.file("b.txt"), "bee");
  write_file(dir.file("a.txt"), "ay");
  DocumentReader r({dir.file("b.txt"), dir.file("a.txt")}, opts(config::SourceFormat::text));
  const auto docs = read_all(r);
  ASSERT_EQ(docs.size(), 2u);
  EXPECT_EQ(docs[0].text, "bee");  // the caller's order, not sorted
  EXPECT_EQ(docs[1].text, "ay");
}

TEST(TextReader, MissingInputIsFatalAndNamed) {
  try {
    DocumentReader r({"/nonexistent/corpus"}, opts(config::SourceFormat::text));
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent/corpus"), std::string::npos) << e.what();
  }
}

TEST(TextReader, TooLargeAndCorruptCompressedFilesAreCountedNotFatal) {
  TempDir dir;
  std::filesystem::create_directories(dir.file("in"));
  write_file(dir.file("in/big.txt"), std::string(100, 'x'));
  write_file(dir.file("in/ok.txt"), "fine");
  const char kBadGzip[] = "\x1f\x8b\x08\x00 this is a gzip header, then no deflate stream";
  write_file(dir.file("in/broken.txt.gz"), std::string(kBadGzip, sizeof(kBadGzip) - 1));
  ReaderOptions o = opts(config::SourceFormat::text);
  o.max_document_bytes = 50;
  DocumentReader r({dir.file("in")}, o);
  const auto docs = read_all(r);
  ASSERT_EQ(docs.size(), 1u);
  EXPECT_EQ(docs[0].text, "fine");
  EXPECT_EQ(r.report().unreadable, 2u);
  ASSERT_EQ(r.report().problems.size(), 2u);
  EXPECT_NE(r.report().problems[0].find("big.txt: larger than"), std::string::npos);
  EXPECT_NE(r.report().problems[1].find("broken.txt.gz"), std::string::npos);
}

TEST(TextReader, CompressedTextFile) {
  TempDir dir;
  // A .gz single file: a raw gzip stream, written via libarchive's raw format.
  struct archive* a = archive_write_new();
  archive_write_add_filter_gzip(a);
  archive_write_set_format_raw(a);
  ASSERT_EQ(archive_write_open_filename(a, dir.file("t.txt.gz").c_str()), ARCHIVE_OK);
  struct archive_entry* e = archive_entry_new();
  archive_entry_set_filetype(e, AE_IFREG);
  archive_write_header(a, e);
  const std::string text = "compressed text\nsecond line\n";
  archive_write_data(a, text.data(), text.size());
  archive_entry_free(e);
  archive_write_close(a);
  archive_write_free(a);
  DocumentReader r({dir.file("t.txt.gz")}, opts(config::SourceFormat::text));
  const auto docs = read_all(r);
  ASSERT_EQ(docs.size(), 1u);
  EXPECT_EQ(docs[0].text, text);
}

TEST(TextReader, UnreadableFileInFolderIsCounted) {
  TempDir dir;
  std::filesystem::create_directories(dir.file("in"));
  write_file(dir.file("in/a.txt"), "a");
  if (::geteuid() == 0) {
    // Root reads files whatever their mode: a link to nothing is unreadable for anyone.
    std::filesystem::create_symlink(dir.file("nowhere.txt"), dir.file("in/secret.txt"));
  } else {
    write_file(dir.file("in/secret.txt"), "s");
    ::chmod(dir.file("in/secret.txt").c_str(), 0);
  }
  DocumentReader r({dir.file("in")}, opts(config::SourceFormat::text));
  EXPECT_EQ(read_all(r).size(), 1u);
  EXPECT_EQ(r.report().unreadable, 1u);
  EXPECT_NE(r.report().problems.at(0).find("secret.txt"), std::string::npos);
}

// ------------------------------------------------------------------ jsonl

TEST(JsonlReader, GoodBadAndInvalidLines) {
  TempDir dir;
  const std::string path = dir.file("data.jsonl");
  write_file(path,
             "{\"text\": \"first doc\", \"id\": 1}\n"
             "{\"text\": \"caf\xC3\xA9 \\u00e9\\n\"}\r\n"  // CRLF, escapes
             "{\"text\": broken \xFE json}\n"              // line 3: bad JSON (and UTF-8)
             "\n"                                          // blank: ignored
             "{\"id\": 5}\n"                               // line 5: no text
             "{\"text\": 42}\n"                            // line 6: text not a string
             "{\"text\": \"\"}\n"                          // line 7: empty
             "[1, 2]\n"                                    // line 8: not an object
             "{\"text\": \"bad \xFF byte\"}\n"             // line 9: invalid UTF-8
             "{\"text\": \"last, no newline\"}");
  DocumentReader r({path}, opts(config::SourceFormat::jsonl));
  const auto docs = read_all(r);
  ASSERT_EQ(docs.size(), 4u);
  EXPECT_EQ(docs[0].text, "first doc");
  EXPECT_EQ(docs[0].name, path + ":1");
  EXPECT_EQ(docs[1].text, "caf\xC3\xA9 \xC3\xA9\n");
  EXPECT_EQ(docs[2].text, "bad " + kFFFD + " byte");
  EXPECT_EQ(docs[2].name, path + ":9");
  EXPECT_EQ(docs[3].text, "last, no newline");
  EXPECT_EQ(docs[3].name, path + ":10");
  const InputReport& rep = r.report();
  EXPECT_EQ(rep.documents, 4u);
  EXPECT_EQ(rep.empty, 1u);
  EXPECT_EQ(rep.unreadable, 4u);              // lines 3, 5, 6, 8
  EXPECT_EQ(rep.invalid_utf8_documents, 1u);  // line 9; line 3 is counted as skipped only
  ASSERT_EQ(rep.problems.size(), 4u);
  EXPECT_EQ(rep.problems[0], path + ":3: not valid JSON, skipped");
  EXPECT_EQ(rep.problems[1], path + ":5: no string field \"text\", skipped");
  EXPECT_EQ(rep.problems[2], path + ":6: no string field \"text\", skipped");
  EXPECT_EQ(rep.problems[3], path + ":8: not a JSON object, skipped");
}

TEST(JsonlReader, OtherKeyAndNamedProblemLimit) {
  TempDir dir;
  std::string text;
  for (int i = 0; i < 20; ++i) text += "not json\n";
  text += "{\"content\": \"kept\"}\n";
  write_file(dir.file("x.jsonl"), text);
  ReaderOptions o = opts(config::SourceFormat::jsonl);
  o.json_key = "content";
  o.max_named_problems = 3;
  DocumentReader r({dir.file("x.jsonl")}, o);
  const auto docs = read_all(r);
  ASSERT_EQ(docs.size(), 1u);
  EXPECT_EQ(docs[0].text, "kept");
  EXPECT_EQ(r.report().unreadable, 20u);      // all counted
  EXPECT_EQ(r.report().problems.size(), 3u);  // the first few named
}

// ------------------------------------------------------------------ tar

class TarReader : public ::testing::TestWithParam<std::pair<std::string, std::string>> {};

TEST_P(TarReader, MembersAreDocumentsInArchiveOrder) {
  const auto& [filter, ext] = GetParam();
  TempDir dir;
  const std::string path = dir.file("shard" + ext);
  write_tar(path, filter,
            {{"src/", ""},
             {"src/main.c", "int main(void) { return 0; }\n"},
             {"src/a.h", "#pragma once\n"},
             {"src/link.h->a.h", ""},
             {"src/empty.c", ""},
             {"README", "read me \xC3"},
             {"src/big.c", std::string(200000, 'z')}});
  DocumentReader r({path}, opts(config::SourceFormat::tar));
  const auto docs = read_all(r);
  EXPECT_EQ(names(docs), (std::vector<std::string>{path + ":src/main.c", path + ":src/a.h",
                                                   path + ":README", path + ":src/big.c"}));
  ASSERT_EQ(docs.size(), 4u);
  EXPECT_EQ(docs[0].text, "int main(void) { return 0; }\n");
  EXPECT_EQ(docs[2].text, "read me " + kFFFD);
  EXPECT_EQ(docs[3].text, std::string(200000, 'z'));
  EXPECT_EQ(r.report().empty, 1u);
  EXPECT_EQ(r.report().invalid_utf8_documents, 1u);
  EXPECT_EQ(r.report().unreadable, 0u);
  EXPECT_EQ(r.consumed_bytes(), std::filesystem::file_size(path));

  DocumentReader filtered({path}, opts(config::SourceFormat::tar, "*.c"));
  EXPECT_EQ(names(read_all(filtered)),
            (std::vector<std::string>{path + ":src/main.c", path + ":src/big.c"}));
}

INSTANTIATE_TEST_SUITE_P(Filters, TarReader,
                         ::testing::Values(std::make_pair("none", ".tar"),
                                           std::make_pair("gzip", ".tar.gz"),
                                           std::make_pair("xz", ".tar.xz")));

TEST(TarReaderErrors, NamedNonArchiveIsFatal) {
  TempDir dir;
  write_file(dir.file("notes.tar"), "this is plain text, not a tar archive at all......");
  DocumentReader r({dir.file("notes.tar")}, opts(config::SourceFormat::tar));
  Document d;
  try {
    r.next(&d);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(dir.file("notes.tar") + ": not a readable tar archive"),
              std::string::npos)
        << e.what();
  }
}

TEST(TarReaderErrors, TruncatedArchiveKeepsEarlierMembersAndCountsTheRest) {
  TempDir dir;
  const std::string full = dir.file("full.tar.gz");
  std::string big;
  for (int i = 0; big.size() < 300000; ++i) big += std::to_string(i * 7919) + " ";
  write_tar(full, "gzip", {{"a.txt", "first"}, {"b.txt", big}, {"c.txt", "third"}});
  const std::string bytes = slurp(full);
  std::filesystem::create_directories(dir.file("shards"));
  write_file(dir.file("shards/cut.tar.gz"), bytes.substr(0, bytes.size() / 2));
  write_file(dir.file("shards/notes.txt"), "not an archive name: ignored in folders");
  write_file(dir.file("shards/z.tar"), "garbage that claims to be a tar archive by its name....");
  DocumentReader r({dir.file("shards")}, opts(config::SourceFormat::tar));
  EXPECT_EQ(r.num_files(), 2u);
  const auto docs = read_all(r);
  ASSERT_GE(docs.size(), 1u);
  EXPECT_EQ(docs[0].text, "first");
  for (const auto& d : docs) EXPECT_NE(d.text, "third");
  EXPECT_EQ(r.report().unreadable, 2u);  // the cut archive and the garbage one
  ASSERT_EQ(r.report().problems.size(), 2u);
  EXPECT_NE(r.report().problems[0].find("cut.tar.gz"), std::string::npos);
  EXPECT_NE(r.report().problems[1].find("z.tar: not a readable tar archive"), std::string::npos);
}

TEST(ReaderFormatNames, ParseAndReject) {
  EXPECT_EQ(parse_input_format("jsonl"), config::SourceFormat::jsonl);
  EXPECT_STREQ(input_format_name(config::SourceFormat::tar), "tar");
  EXPECT_THROW(parse_input_format("parquet"), Error);
}

}  // namespace
}  // namespace meshloom::data
