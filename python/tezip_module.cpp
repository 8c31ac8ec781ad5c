// The `tezip` Python module: Reader and Stream over NumPy arrays. Pixels are handed to NumPy
// without a copy: the array owns the buffer the decoder filled.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstdio>
#include <memory>
#include <optional>
#include <string>

#include "format/errors.hpp"
#include "loader/reader.hpp"
#include "loader/stream.hpp"

namespace py = pybind11;
using namespace tezip;

namespace {

// (T, H, W[, C]) interleaved, or (H, W[, C]) when `squeeze` drops T == 1.
py::array to_array(Clip&& clip, bool squeeze) {
  const auto& g = clip.geometry;
  const std::size_t element = clip.element_size();
  std::vector<py::ssize_t> shape, strides;
  if (!squeeze) shape.push_back(py::ssize_t(clip.length));
  shape.push_back(py::ssize_t(g.height));
  shape.push_back(py::ssize_t(g.width));
  if (g.channels > 1) shape.push_back(py::ssize_t(g.channels));
  py::ssize_t stride = py::ssize_t(element);
  strides.resize(shape.size());
  for (std::size_t i = shape.size(); i-- > 0;) {
    strides[i] = stride;
    stride *= shape[i];
  }
  auto* owner = new std::vector<std::uint8_t>(std::move(clip.data));
  py::capsule base(owner, [](void* p) { delete static_cast<std::vector<std::uint8_t>*>(p); });
  if (element == 1) return py::array(py::dtype::of<std::uint8_t>(), shape, strides, owner->data(), base);
  return py::array(py::dtype::of<std::uint16_t>(), shape, strides, owner->data(), base);
}

struct PySample {
  py::array frames;
  std::size_t sequence, start, position;
  bool repeated;
};

Balance parse_balance(const std::string& name) {
  if (name == "repeat") return Balance::Repeat;
  if (name == "drop") return Balance::Drop;
  throw std::invalid_argument("balance must be 'repeat' or 'drop', not '" + name + "'");
}

std::optional<StreamState> parse_state(const py::object& state) {
  if (state.is_none()) return std::nullopt;
  if (py::isinstance<py::str>(state)) return StreamState::parse(state.cast<std::string>());
  if (py::isinstance<py::dict>(state)) {
    const auto d = state.cast<py::dict>();
    if (d.contains("state")) return StreamState::parse(d["state"].cast<std::string>());
  }
  throw std::invalid_argument("state must be what Stream.state_dict() returned");
}

py::dict report_dict(const ExchangeReport& r) {
  py::dict d;
  d["bytes"] = r.bytes;
  d["new_bytes"] = r.new_bytes;
  d["blocks"] = r.blocks;
  d["new_blocks"] = r.new_blocks;
  return d;
}

}  // namespace

PYBIND11_MODULE(_tezip, m) {
  m.doc() = "Read tezip archives: random access (Reader) and sharded, shuffled training streams (Stream).";
  m.attr("__version__") = TEZIP_VERSION_STRING;
  py::register_exception<DataError>(m, "DataError", PyExc_ValueError);
  py::register_exception<InputError>(m, "InputError", PyExc_OSError);

  py::class_<Reader, std::shared_ptr<Reader>>(m, "Reader")
      .def(py::init([](const std::string& path, std::size_t cache_gops) {
             ReaderOptions o;
             o.cache_gops = cache_gops;
             return std::make_shared<Reader>(path, o);
           }),
           py::arg("path"), py::arg("cache_gops") = 16)
      .def_property_readonly("num_sequences", &Reader::num_sequences)
      .def("num_frames", &Reader::num_frames, py::arg("seq"))
      .def("sequence_name", &Reader::sequence_name, py::arg("seq"))
      .def("shape", [](const Reader& r, std::size_t seq) {
             const auto& g = r.geometry(seq);
             return g.channels > 1 ? py::make_tuple(g.height, g.width, g.channels) : py::make_tuple(g.height, g.width);
           }, py::arg("seq"), "Shape of one frame: (H, W) or (H, W, C)")
      .def("frame", [](const Reader& r, std::size_t seq, std::size_t t) {
             Clip c;
             {
               py::gil_scoped_release release;
               c = r.frame(seq, t, ClipLayout::Interleaved);
             }
             return to_array(std::move(c), true);
           }, py::arg("seq"), py::arg("t"), "Frame t of sequence seq: (H, W) or (H, W, C), uint8 or uint16, channels as stored (BGR for images)")
      .def("clip", [](const Reader& r, std::size_t seq, std::size_t start, std::size_t length) {
             Clip c;
             {
               py::gil_scoped_release release;
               c = r.clip(seq, start, length, ClipLayout::Interleaved);
             }
             return to_array(std::move(c), false);
           }, py::arg("seq"), py::arg("start"), py::arg("length"), "Frames start..start+length-1: (T, H, W[, C])");

  py::class_<PySample>(m, "Sample")
      .def_readonly("frames", &PySample::frames, "(T, H, W[, C]) uint8 or uint16")
      .def_readonly("sequence", &PySample::sequence)
      .def_readonly("start", &PySample::start)
      .def_readonly("position", &PySample::position)
      .def_readonly("repeated", &PySample::repeated, "a pad that repeats a sample of this epoch (equal counts per rank)")
      .def("__repr__", [](const PySample& s) {
        return "<tezip.Sample sequence=" + std::to_string(s.sequence) + " start=" + std::to_string(s.start) + ">";
      });

  py::class_<Stream>(m, "Stream")
      .def(py::init([](const std::string& path, std::size_t clip_len, std::size_t stride, std::size_t rank,
                       std::size_t world_size, std::uint64_t seed, std::uint64_t epoch, std::size_t shuffle_buffer,
                       double exchange, unsigned threads, std::size_t prefetch, const std::string& balance,
                       std::size_t cache_gops, const py::object& state, std::optional<std::uint64_t> position) {
             StreamOptions o;
             o.clip_len = clip_len, o.stride = stride, o.rank = rank, o.world_size = world_size;
             o.seed = seed, o.epoch = epoch, o.shuffle_buffer = shuffle_buffer, o.exchange = exchange;
             o.threads = threads, o.prefetch = prefetch, o.balance = parse_balance(balance);
             o.layout = ClipLayout::Interleaved, o.cache_gops = cache_gops;
             auto resume = parse_state(state);
             if (position && resume) throw std::invalid_argument("give state= or position=, not both");
             py::gil_scoped_release release;
             if (!position) return std::make_unique<Stream>(path, o, resume);
             // Start at `position` of epoch `epoch`: the state a stream of these options would have
             // saved there (tezip.torch resumes each DataLoader worker's stream this way).
             ReaderOptions r;
             r.cache_gops = o.cache_gops ? o.cache_gops : 2 * std::size_t(o.threads) + 4;
             auto reader = std::make_shared<const Reader>(path, r);
             resume = StreamState{o.epoch, *position, StreamPlan(*reader, o).fingerprint()};
             return std::make_unique<Stream>(std::move(reader), o, resume);
           }),
           py::arg("path"), py::arg("clip_len") = 1, py::arg("stride") = 1, py::arg("rank") = 0, py::arg("world_size") = 1,
           py::arg("seed") = 0, py::arg("epoch") = 0, py::arg("shuffle_buffer") = 256, py::arg("exchange") = 1.0,
           py::arg("threads") = 2, py::arg("prefetch") = 8, py::arg("balance") = "repeat", py::arg("cache_gops") = 0,
           py::arg("state") = py::none(), py::arg("position") = py::none())
      .def("__iter__", [](Stream& s) -> Stream& { return s; }, py::return_value_policy::reference_internal)
      .def("__next__", [](Stream& s) {
        std::optional<Sample> sample;
        {
          py::gil_scoped_release release;
          sample = s.next();
        }
        if (!sample) throw py::stop_iteration();
        const auto sequence = sample->sequence, start = sample->start, position = sample->position;
        const bool repeated = sample->repeated;
        return PySample{to_array(std::move(static_cast<Clip&>(*sample)), false), sequence, start, position, repeated};
      })
      .def("__len__", &Stream::size)
      .def_property_readonly("position", &Stream::position)
      .def_property_readonly("epoch", [](const Stream& s) { return s.options().epoch; })
      .def("state_dict", [](const Stream& s) {
        const auto st = s.state();
        py::dict d;
        d["epoch"] = st.epoch;
        d["position"] = st.position;
        d["state"] = st.serialize();
        return d;
      }, "Where the stream stands; Stream(..., state=that) resumes with exactly the samples not yet delivered")
      .def("exchange_report", [](const Stream& s) { return report_dict(s.exchange_report()); },
           "Per rank: bytes (compressed) of the blocks it reads this epoch, and of those it did not read the epoch before");
}
