// The prepare pipeline: a reader thread, N tokenizing workers and an in-order
// writer on the calling thread (see prepare.hpp).
#include "data/prepare.hpp"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <exception>
#include <map>
#include <memory>
#include <mutex>
#include <thread>

#include "base/check.hpp"
#include "base/strings.hpp"
#include "base/utf8.hpp"

namespace meshloom::data {

namespace {

constexpr size_t kBatchDocuments = 256;
constexpr size_t kBatchBytes = 1 << 20;

struct Batch {
  uint64_t id = 0;
  std::vector<Document> docs;
  size_t bytes = 0;
  uint64_t input_done = 0;  // the reader's input position after this batch
  // Filled by a worker.
  std::vector<std::vector<int32_t>> tokens;
  uint64_t text_bytes = 0;
  uint64_t invalid_documents = 0;
  uint64_t invalid_sequences = 0;
};

// Shared state of the three stages; every field is guarded by mu.
class Pipeline {
 public:
  explicit Pipeline(size_t max_in_flight) : max_in_flight_(max_in_flight) {}

  // Reader: queues a batch; false if the pipeline was stopped.
  bool push(std::unique_ptr<Batch> batch) {
    std::unique_lock lock(mu_);
    space_.wait(lock, [&] { return stop_ || produced_ - written_ < max_in_flight_; });
    if (stop_) return false;
    batch->id = produced_++;
    queue_.push_back(std::move(batch));
    work_.notify_one();
    return true;
  }
  void reader_done() {
    std::lock_guard lock(mu_);
    reader_done_ = true;
    work_.notify_all();
    done_.notify_all();
  }

  // Worker: the next batch to tokenize, or null when there is no more work.
  std::unique_ptr<Batch> take_work() {
    std::unique_lock lock(mu_);
    work_.wait(lock, [&] { return stop_ || !queue_.empty() || reader_done_; });
    if (stop_ || queue_.empty()) return nullptr;
    std::unique_ptr<Batch> b = std::move(queue_.front());
    queue_.pop_front();
    return b;
  }
  void finish_work(std::unique_ptr<Batch> batch) {
    std::lock_guard lock(mu_);
    const uint64_t id = batch->id;
    finished_[id] = std::move(batch);
    done_.notify_all();
  }

  // Writer: the next batch in order; null on timeout (*end false) or at the
  // end or on a stop (*end true).
  std::unique_ptr<Batch> take_next(std::chrono::duration<double> timeout, bool* end) {
    std::unique_lock lock(mu_);
    *end = false;
    auto ready = [&] {
      return stop_ || finished_.count(written_) > 0 || (reader_done_ && written_ == produced_);
    };
    if (!done_.wait_for(lock, timeout, ready)) return nullptr;
    auto it = finished_.find(written_);
    if (stop_ || it == finished_.end()) {
      *end = true;
      return nullptr;
    }
    std::unique_ptr<Batch> b = std::move(it->second);
    finished_.erase(it);
    return b;
  }
  void written_one() {
    std::lock_guard lock(mu_);
    ++written_;
    space_.notify_all();
  }

  // Any stage: records the first error and stops everything.
  void fail(std::exception_ptr e) {
    std::lock_guard lock(mu_);
    if (!error_) error_ = e;
    stop_ = true;
    work_.notify_all();
    done_.notify_all();
    space_.notify_all();
  }
  std::exception_ptr error() {
    std::lock_guard lock(mu_);
    return error_;
  }

 private:
  std::mutex mu_;
  std::condition_variable work_, done_, space_;
  const size_t max_in_flight_;
  std::deque<std::unique_ptr<Batch>> queue_;
  std::map<uint64_t, std::unique_ptr<Batch>> finished_;
  uint64_t produced_ = 0;
  uint64_t written_ = 0;
  bool reader_done_ = false;
  bool stop_ = false;
  std::exception_ptr error_;
};

void read_all(DocumentReader* reader, Pipeline* pipe) {
  try {
    auto batch = std::make_unique<Batch>();
    Document doc;
    while (reader->next(&doc)) {
      batch->bytes += doc.text.size();
      batch->docs.push_back(std::move(doc));
      doc = Document{};
      if (batch->docs.size() >= kBatchDocuments || batch->bytes >= kBatchBytes) {
        batch->input_done = reader->consumed_bytes();
        if (!pipe->push(std::move(batch))) return;
        batch = std::make_unique<Batch>();
      }
    }
    batch->input_done = reader->consumed_bytes();
    if (!batch->docs.empty() && !pipe->push(std::move(batch))) return;
  } catch (...) {
    pipe->fail(std::current_exception());
  }
  pipe->reader_done();
}

void tokenize_all(const tokenizer::Tokenizer* tokenizer, Pipeline* pipe) {
  const int32_t eot = tokenizer->eot_id();
  try {
    while (std::unique_ptr<Batch> b = pipe->take_work()) {
      b->tokens.resize(b->docs.size());
      for (size_t k = 0; k < b->docs.size(); ++k) {
        std::string& text = b->docs[k].text;
        if (size_t bad = sanitize_utf8(&text); bad > 0) {
          ++b->invalid_documents;
          b->invalid_sequences += bad;
        }
        b->text_bytes += text.size();
        try {
          b->tokens[k] = tokenizer->encode(text);
        } catch (const Error&) {
          throw;
        } catch (const std::exception& e) {
          throw Error(strf("tokenizer %s failed on %s: %s", tokenizer->name().c_str(),
                           b->docs[k].name.c_str(), e.what()));
        }
        if (eot >= 0) b->tokens[k].push_back(eot);
        std::string().swap(text);  // the text is no longer needed
      }
      pipe->finish_work(std::move(b));
    }
  } catch (...) {
    pipe->fail(std::current_exception());
  }
}

}  // namespace

PrepareReport prepare_dataset(const PrepareOptions& options,
                              const tokenizer::Tokenizer& tokenizer) {
  using Clock = std::chrono::steady_clock;
  const auto start = Clock::now();
  auto elapsed = [&start] { return std::chrono::duration<double>(Clock::now() - start).count(); };

  ReaderOptions reader_options = options.reader;
  reader_options.fix_utf8 = false;                        // the workers repair UTF-8, in parallel
  DocumentReader reader(options.inputs, reader_options);  // throws on a bad input path

  PrepareReport report;
  report.dtype = dtype_for_vocab(tokenizer.vocab_size());
  report.eot_appended = tokenizer.eot_id() >= 0;
  report.threads = options.threads > 0
                       ? options.threads
                       : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  IndexedDatasetWriter writer(options.out_prefix, report.dtype);

  Pipeline pipe(2 * static_cast<size_t>(report.threads) + 2);
  std::vector<std::thread> threads;
  threads.emplace_back(read_all, &reader, &pipe);
  for (int t = 0; t < report.threads; ++t) threads.emplace_back(tokenize_all, &tokenizer, &pipe);

  PrepareProgress progress;
  progress.input_total = reader.total_bytes();
  auto report_progress = [&] {
    if (!options.on_progress) return;
    progress.seconds = elapsed();
    options.on_progress(progress);
  };
  double last_progress = 0;
  try {
    for (;;) {
      bool end = false;
      std::unique_ptr<Batch> b = pipe.take_next(
          std::chrono::duration<double>(std::max(0.05, options.progress_interval_s)), &end);
      if (end) break;
      if (b) {
        for (const std::vector<int32_t>& tokens : b->tokens) writer.add_document(tokens);
        progress.documents += b->tokens.size();
        progress.text_bytes += b->text_bytes;
        progress.tokens = writer.num_tokens();
        progress.input_done = b->input_done;
        report.input.invalid_utf8_documents += b->invalid_documents;
        report.input.invalid_utf8_sequences += b->invalid_sequences;
        pipe.written_one();
      }
      if (elapsed() - last_progress >= options.progress_interval_s) {
        last_progress = elapsed();
        report_progress();
      }
    }
  } catch (...) {
    pipe.fail(std::current_exception());
  }
  for (std::thread& t : threads) t.join();
  if (std::exception_ptr e = pipe.error()) std::rethrow_exception(e);

  // Merge the reader's counts (empty, unreadable, JSON lines' UTF-8 repairs).
  const InputReport& r = reader.report();
  report.input.documents = r.documents;
  report.input.empty = r.empty;
  report.input.unreadable = r.unreadable;
  report.input.problems = r.problems;
  report.input.invalid_utf8_documents += r.invalid_utf8_documents;
  report.input.invalid_utf8_sequences += r.invalid_utf8_sequences;
  report.input.bytes = progress.text_bytes;
  report.text_bytes = progress.text_bytes;
  report.input_bytes = reader.total_bytes();
  ML_CHECK(r.documents == writer.num_documents(), "documents read and written differ");

  if (writer.num_documents() == 0) {
    std::string why =
        strf("no documents found in %s (format %s", join(options.inputs, ", ").c_str(),
             input_format_name(options.reader.format));
    if (!options.reader.glob.empty()) why += ", glob '" + options.reader.glob + "'";
    why += strf("): %llu empty, %llu unreadable", static_cast<unsigned long long>(r.empty),
                static_cast<unsigned long long>(r.unreadable));
    if (!r.problems.empty()) why += "; first: " + r.problems.front();
    throw Error(why);
  }
  writer.finalize();
  report.tokens = writer.num_tokens();
  report.bin_bytes = writer.bin_bytes();
  report.seconds = elapsed();
  progress.input_done = reader.total_bytes();
  progress.seconds = report.seconds;
  if (options.on_progress) options.on_progress(progress);
  return report;
}

}  // namespace meshloom::data
