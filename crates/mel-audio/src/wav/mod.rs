//! WAV, read by melctl itself: the header parser ([`header`]: RIFF, RF64 and BW64, with
//! the rules for inconsistent headers) and the data reader ([`read`]: PCM, float and
//! G.711, converted here; ADPCM goes to symphonia).

pub(crate) mod header;
pub(crate) mod read;

pub(crate) use header::{Coding, WavHeader, parse};
