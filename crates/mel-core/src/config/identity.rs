//! What makes two builds the same, by purpose, as views of a resolved configuration (its
//! JSON, as stored in every output): one definition for the readers' compatibility
//! check, the resume journal and the shards of one build.

use serde_json::Value;

/// How alike two builds must be, by what they are used for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sameness {
    /// The same meaning: features a model trained on one reads right on the other
    /// (audio, segmentation, mel and log settings; not the transform's precision nor
    /// the stored element type, which change rounding only). Splits read together.
    Meaning,
    /// The same values, bit for bit: the meaning, the precision and the element type.
    /// Batches of an interrupted build continued by a resumed one.
    Values,
    /// The same output: every setting but how it was run (`run`) and flushed
    /// (`output.fsync`), so chunking and compression too. Shards merged into one build.
    Output,
}

/// The sections of the configuration that decide what a spectrogram's values mean.
const MEANING: [&str; 4] = ["audio", "segment", "mel", "log"];

/// Keys inside the meaning sections that change rounding, not meaning.
const ROUNDING: [(&str, &str); 1] = [("mel", "precision")];

impl Sameness {
    /// The part of `config` (a resolved configuration's JSON) that two builds must share
    /// to be the same in this sense; compared whole, or key by key for a message.
    pub fn view(self, config: &Value) -> Value {
        match self {
            Sameness::Meaning | Sameness::Values => {
                let mut view = serde_json::Map::new();
                for section in MEANING {
                    view.insert(section.into(), config[section].clone());
                }
                if self == Sameness::Meaning {
                    for (section, key) in ROUNDING {
                        if let Some(s) = view.get_mut(section).and_then(Value::as_object_mut) {
                            s.remove(key);
                        }
                    }
                    strip_bounds(&mut view);
                } else {
                    view.insert("dtype".into(), config["output"]["dtype"].clone());
                }
                Value::Object(view)
            }
            Sameness::Output => {
                let mut view = config.clone();
                if let Some(map) = view.as_object_mut() {
                    map.remove("run");
                    if let Some(output) = map.get_mut("output").and_then(Value::as_object_mut) {
                        output.remove("fsync");
                    }
                }
                view
            }
        }
    }
}

/// Takes out of a meaning view the audio keys that bound a build but do not change a
/// value: `max_seconds` (the longest file a build keeps), `clip_seconds` of whole clips
/// (it sets no length), and a window's hop (a window is a clip of `windows.seconds`).
fn strip_bounds(view: &mut serde_json::Map<String, Value>) {
    let Some(audio) = view.get_mut("audio").and_then(Value::as_object_mut) else {
        return;
    };
    audio.remove("max_seconds");
    // A window is a clip of its `seconds`: the same features as fixed clips of that
    // length, whatever the hop.
    if let Some(seconds) = audio
        .remove("windows")
        .and_then(|w| w.get("seconds").cloned())
    {
        audio.insert("clip_seconds".into(), seconds);
    }
    if audio.get("length").and_then(Value::as_str) == Some("whole") {
        audio.remove("clip_seconds");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;
    use crate::spec::Precision;

    fn json(c: &Config) -> Value {
        serde_json::from_str(&c.resolved_json()).unwrap()
    }

    /// Whether `a` and `b` are the same in sense `s`.
    fn same(s: Sameness, a: &Config, b: &Config) -> bool {
        s.view(&json(a)) == s.view(&json(b))
    }

    #[test]
    fn each_sense_tells_apart_what_it_must_and_nothing_else() {
        let base = Config::default();
        let all = [Sameness::Meaning, Sameness::Values, Sameness::Output];
        let changed = |f: &dyn Fn(&mut Config)| {
            let mut c = base.clone();
            f(&mut c);
            c
        };
        // (the change, the senses in which the two are still the same)
        let cases: Vec<(Config, Vec<Sameness>)> = vec![
            (changed(&|c| c.mel.n_mels += 1), vec![]),
            (changed(&|c| c.audio.sample_rate += 1), vec![]),
            (
                changed(&|c| c.mel.precision = Precision::Fast),
                vec![Sameness::Meaning],
            ),
            (
                changed(&|c| c.output.dtype = crate::Dtype::F32),
                vec![Sameness::Meaning],
            ),
            (
                changed(&|c| c.hdf5.chunk_clips += 1),
                vec![Sameness::Meaning, Sameness::Values],
            ),
            (changed(&|c| c.run.threads += 3), all.to_vec()),
            // A bound on the files a build keeps does not change a value.
            (
                changed(&|c| c.audio.max_seconds = 700.0),
                vec![Sameness::Meaning],
            ),
            (changed(&|c| c.output.fsync = !c.output.fsync), all.to_vec()),
        ];
        for (i, (other, alike)) in cases.iter().enumerate() {
            for s in all {
                assert_eq!(same(s, &base, other), alike.contains(&s), "case {i}, {s:?}");
            }
        }
        // Where files are read whole, clip_seconds sets nothing.
        let whole = changed(&|c| c.audio.length = crate::spec::ClipLength::Whole);
        let longer = {
            let mut c = whole.clone();
            c.audio.clip_seconds = 99.0;
            c
        };
        assert!(same(Sameness::Meaning, &whole, &longer));
        assert!(!same(Sameness::Meaning, &base, &whole));
        // Windows of S seconds mean what fixed clips of S seconds mean, whatever the hop.
        let windows = changed(&|c| {
            c.audio.windows = Some(crate::spec::Windows {
                seconds: c.audio.clip_seconds,
                hop_seconds: 1.0,
            })
        });
        assert!(same(Sameness::Meaning, &base, &windows));
        // A value left to its default and the same value written out are the same.
        let explicit = changed(&|c| c.mel.win_length = Some(c.mel.win_length()));
        assert!(all.iter().all(|&s| same(s, &base, &explicit)));
    }
}
