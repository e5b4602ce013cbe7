// Fuzz target for the text corpus reader (data/TextCorpus.h over
// data/GzReader.h): plain and gzip text files, directories of documents and the
// WikiText layout. The first input byte picks the layout of the rest:
//   0 one plain file doc.txt          1 one gzip file doc.rst.gz (rest compressed)
//   2 the rest as doc.rst.gz as is    3 a directory, one document per NUL-separated
//     (mutated or corrupt gzip)         part (every third gzip-compressed)
//   4 a WikiText directory: wiki.train.tokens, then after the first NUL wiki.valid.tokens
// Both splits are loaded. A bad corpus must give a UserError naming the path; a
// corpus that loads must hold some text.
#include "data/TextCorpus.h"
#include "tests/fuzz/FuzzSupport.h"

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace gradzip;
  namespace fs = std::filesystem;
  if (size == 0) return 0;
  const std::string_view rest(reinterpret_cast<const char*>(data) + 1, size - 1);
  const std::string root = fuzz::scratchDir() + "/text";
  fs::remove_all(root);
  fs::create_directories(root);
  std::string path;  // what TextCorpus::load is given
  switch (data[0] % 5) {
    case 0:
      path = root + "/doc.txt";
      fuzz::writeFile(path, rest);
      break;
    case 1:
      path = root + "/doc.rst.gz";
      fuzz::writeGz(path, rest);
      break;
    case 2:
      path = root + "/doc.rst.gz";
      fuzz::writeFile(path, rest);
      break;
    case 3: {
      path = root;
      size_t start = 0;
      for (int i = 0; start <= rest.size() && i < 120; ++i) {
        size_t end = std::min(rest.find('\0', start), rest.size());
        const std::string stem = root + "/doc" + std::to_string(1000 + i);
        if (i % 3 == 2)
          fuzz::writeGz(stem + ".rst.gz", rest.substr(start, end - start));
        else
          fuzz::writeFile(stem + ".rst", rest.substr(start, end - start));
        start = end + 1;
      }
      break;
    }
    default: {
      path = root;
      size_t cut = rest.find('\0');
      fuzz::writeFile(root + "/wiki.train.tokens", rest.substr(0, cut));
      if (cut != std::string_view::npos) fuzz::writeFile(root + "/wiki.valid.tokens", rest.substr(cut + 1));
      break;
    }
  }
  for (auto split : {data::TextSplit::kTrain, data::TextSplit::kValid}) {
    fuzz::expectOnlyUserErrors(path, [&] {
      auto corpus = data::TextCorpus::load({path}, split);
      if (corpus.bytes() <= 0 || corpus.documents().empty()) fuzz::fail("a corpus loaded without text");
      (void)corpus.fingerprint();
      (void)corpus.describe();
    });
  }
  return 0;
}
