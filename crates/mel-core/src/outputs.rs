//! Every path a run will write, checked before any work ([`Guard::check`]): an output
//! must not be an input of the run (same device and inode), the manifest, configuration
//! or label map, another output of the same run, or an existing file of a kind it would
//! destroy (a device, a FIFO, a socket, a folder where a file goes). Outputs that may be
//! streams (a report, a picture) are written straight into an existing FIFO or character
//! device, never by temporary file and rename ([`crate::atomic::write_file`]).

use std::collections::HashMap;
use std::path::{Component, Path, PathBuf};

use crate::error::{Error, Result};
use crate::input::describe;

/// How an output is written, and so what may already be at its path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Written {
    /// A regular file replaced whole by a temporary file and a rename (a split's `.h5`,
    /// the build record, a cache file).
    File,
    /// A folder replaced whole (a split's `.npy.d`, a resume journal).
    Folder,
    /// A regular file replaced by rename, or an existing FIFO or character device
    /// written directly (a report, a picture).
    Stream,
}

/// One path a run will write.
#[derive(Debug, Clone)]
pub struct Output {
    /// Where.
    pub path: PathBuf,
    /// What it is, in words ("the report", "split training").
    pub what: String,
    /// How it is written.
    pub written: Written,
    /// For a folder replaced whole: the names of the files melctl writes in it. Anything
    /// else found there is someone's, and the output is refused rather than deleting it.
    pub holds: Option<fn(&str) -> bool>,
}

impl Output {
    /// `what` at `path`, written as `written`.
    pub fn new(path: impl Into<PathBuf>, what: impl Into<String>, written: Written) -> Self {
        Output {
            path: path.into(),
            what: what.into(),
            written,
            holds: None,
        }
    }

    /// The same output, a folder in which melctl writes only the files `names` accepts.
    pub fn holding(mut self, names: fn(&str) -> bool) -> Self {
        self.holds = Some(names);
        self
    }
}

/// Device and inode: what makes two paths one file.
type FileId = (u64, u64);

/// Entries of an existing output folder examined at most (a melctl output holds a few).
const MAX_FOLDER_ENTRIES: usize = 100_000;

/// The files a run reads, which no output may replace.
#[derive(Debug, Default)]
pub struct Guard {
    /// Inputs by identity, with what each is ("an input", "the manifest").
    inputs: HashMap<FileId, (PathBuf, &'static str)>,
}

fn file_id(m: &std::fs::Metadata) -> FileId {
    use std::os::unix::fs::MetadataExt;
    (m.dev(), m.ino())
}

impl Guard {
    /// A guard with no inputs yet.
    pub fn new() -> Self {
        Guard::default()
    }

    /// Protects the input file at `path`, described as `what` ("an input of this build",
    /// "the manifest"); a path that does not exist is skipped (nothing to overwrite).
    pub fn input(&mut self, path: &Path, what: &'static str) {
        if let Ok(m) = std::fs::metadata(path) {
            self.inputs
                .entry(file_id(&m))
                .or_insert_with(|| (path.to_path_buf(), what));
        }
    }

    /// Refuses the first of `outputs` that would overwrite an input, another output, or
    /// an existing file of another kind, naming the path and why, before anything is
    /// written. Also refuses a file output whose folder cannot take a new file.
    pub fn check(&self, outputs: &[Output]) -> Result<()> {
        let mut seen: HashMap<PathBuf, &Output> = HashMap::new();
        let mut seen_ids: HashMap<FileId, &Output> = HashMap::new();
        let folders: Vec<(PathBuf, &Output)> = outputs
            .iter()
            .filter(|o| o.written == Written::Folder)
            .map(|o| (normalise(&o.path), o))
            .collect();
        for o in outputs {
            let refuse = |why: String| Error::output(&o.path, format!("{}: {why}", o.what));
            let at = normalise(&o.path);
            if let Some(first) = seen.insert(at.clone(), o) {
                return Err(refuse(format!(
                    "the same path is also {} of this run; give each output its own path",
                    first.what
                )));
            }
            // Inside another build's split folder: that build replaces it whole. Looked for
            // along the path as written and as the file system resolves it (through links).
            let in_split = |p: &Path| -> Option<PathBuf> {
                p.ancestors()
                    .skip(1)
                    .find(|a| {
                        a.extension().is_some_and(|e| e == "d")
                            && a.join(crate::format::NPY_META).is_file()
                    })
                    .map(Path::to_path_buf)
            };
            if let Some(split) = in_split(&at).or_else(|| in_split(&resolved(&o.path))) {
                return Err(refuse(format!(
                    "the path is inside {}, a split folder that its build replaces whole; write it elsewhere",
                    split.display()
                )));
            }
            if let Some((_, folder)) = folders.iter().find(|(f, _)| at != *f && at.starts_with(f)) {
                return Err(refuse(format!(
                    "the path is inside {} ({}), which is replaced whole; write it elsewhere",
                    folder.what,
                    folder.path.display()
                )));
            }
            let meta = match std::fs::metadata(&o.path) {
                Ok(m) => m,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                    if std::fs::symlink_metadata(&o.path).is_ok() {
                        return Err(refuse(
                            "a link that points nowhere is in the way; remove it or write elsewhere"
                                .into(),
                        ));
                    }
                    self.check_folder_takes_files(o)?;
                    continue;
                }
                Err(e) => return Err(Error::io(&o.path, e)),
            };
            if let Some((input, what)) = self.inputs.get(&file_id(&meta)) {
                return Err(refuse(format!(
                    "this would overwrite {what} ({}); write the output elsewhere",
                    input.display()
                )));
            }
            if let Some(first) = seen_ids.insert(file_id(&meta), o) {
                return Err(refuse(format!(
                    "this is the same file as {} ({}); give each output its own path",
                    first.what,
                    first.path.display()
                )));
            }
            if o.written == Written::Stream && crate::atomic::own_descriptor(&o.path).is_some() {
                continue; // one of this process's descriptors, written as it is
            }
            let kind = meta.file_type();
            use std::os::unix::fs::FileTypeExt;
            let fits = match o.written {
                Written::File => kind.is_file(),
                Written::Folder => kind.is_dir(),
                Written::Stream => kind.is_file() || kind.is_fifo() || kind.is_char_device(),
            };
            if !fits {
                let wanted = match o.written {
                    Written::File => "a regular file",
                    Written::Folder => "a folder",
                    Written::Stream => "a regular file, a FIFO or a character device",
                };
                return Err(refuse(format!(
                    "{} is there, and only {wanted} is replaced at this path; remove it or write elsewhere",
                    describe(kind)
                )));
            }
            if kind.is_dir() {
                self.check_folder_contents(o)?;
            } else if kind.is_file() {
                self.check_folder_takes_files(o)?;
            }
        }
        Ok(())
    }

    /// A folder replaced whole must hold no input and no folder: its old contents are
    /// deleted.
    fn check_folder_contents(&self, o: &Output) -> Result<()> {
        let mut seen = 0usize;
        {
            let dir = &o.path;
            let entries = std::fs::read_dir(dir).map_err(|e| Error::io(dir, e))?;
            for e in entries {
                let e = e.map_err(|e| Error::io(dir, e))?;
                seen += 1;
                if seen > MAX_FOLDER_ENTRIES {
                    return Err(Error::output(
                        &o.path,
                        format!(
                            "{}: the folder holds over {MAX_FOLDER_ENTRIES} entries; it is not a melctl output and is not replaced",
                            o.what
                        ),
                    ));
                }
                let m = e.metadata().map_err(|err| Error::io(e.path(), err))?;
                if let Some((input, what)) = self.inputs.get(&file_id(&m)) {
                    return Err(Error::output(
                        &o.path,
                        format!(
                            "{}: the folder is replaced whole, and it holds {what} ({}); write the output elsewhere",
                            o.what,
                            input.display()
                        ),
                    ));
                }
                // melctl's folders (an npy split, a journal) hold only the files melctl
                // writes there: anything else is someone else's (another build's output
                // written inside, a note) and was deleted with the rebuild without a word.
                let name = e.file_name();
                let foreign = !m.is_dir()
                    && o.holds
                        .is_some_and(|holds| !name.to_str().is_some_and(holds));
                if foreign {
                    return Err(Error::output(
                        &o.path,
                        format!(
                            "{}: the folder is replaced whole, and it holds the file {}, which melctl never writes there; move it, or write elsewhere",
                            o.what,
                            e.path().display()
                        ),
                    ));
                }
                if m.is_dir() {
                    return Err(Error::output(
                        &o.path,
                        format!(
                            "{}: the folder is replaced whole, and it holds the folder {}, which melctl never writes there (another output?); move it, or write elsewhere",
                            o.what,
                            e.path().display()
                        ),
                    ));
                }
            }
        }
        Ok(())
    }

    /// A stream output written by rename needs a folder that takes a new file: found now,
    /// not after the work. (Build outputs' folder is created by the build.)
    fn check_folder_takes_files(&self, o: &Output) -> Result<()> {
        if o.written != Written::Stream {
            return Ok(());
        }
        crate::atomic::Staged::file(&o.path)
            .map(drop)
            .map_err(|e| Error::output(&o.path, format!("cannot write {} there: {e}", o.what)))
    }
}

/// `path` made absolute and normalised for comparison: its folder resolved (links
/// `path` with its longest existing prefix resolved by the file system (links followed),
/// the rest appended as written.
fn resolved(path: &Path) -> PathBuf {
    let abs = normalise(path);
    let mut rest = Vec::new();
    let mut existing = abs.as_path();
    loop {
        if let Ok(real) = std::fs::canonicalize(existing) {
            let mut out = real;
            for c in rest.iter().rev() {
                out.push(c);
            }
            return out;
        }
        match (existing.parent(), existing.file_name()) {
            (Some(parent), Some(name)) => {
                rest.push(name.to_os_string());
                existing = parent;
            }
            _ => return abs,
        }
    }
}

/// included) where it exists, `.` and `..` removed lexically otherwise.
pub fn normalise(path: &Path) -> PathBuf {
    let abs = if path.is_absolute() {
        path.to_path_buf()
    } else {
        std::env::current_dir().unwrap_or_default().join(path)
    };
    let mut lexical = PathBuf::new();
    for c in abs.components() {
        match c {
            Component::CurDir => {}
            Component::ParentDir => {
                lexical.pop();
            }
            other => lexical.push(other),
        }
    }
    match (lexical.parent(), lexical.file_name()) {
        (Some(dir), Some(name)) => match std::fs::canonicalize(dir) {
            Ok(d) => d.join(name),
            Err(_) => lexical,
        },
        _ => lexical,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mkfifo(path: &Path) {
        let c = std::ffi::CString::new(path.to_str().unwrap()).unwrap();
        // SAFETY: a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o644) }, 0);
    }

    fn err(g: &Guard, outputs: &[Output]) -> String {
        g.check(outputs).unwrap_err().to_string()
    }

    #[test]
    fn inputs_other_outputs_and_foreign_kinds_are_refused_by_name() {
        let t = tempfile::tempdir().unwrap();
        let p = |n: &str| t.path().join(n);
        std::fs::write(p("in.wav"), b"x").unwrap();
        std::fs::write(p("clips.csv"), b"x").unwrap();
        std::fs::hard_link(p("in.wav"), p("alias.h5")).unwrap();
        let mut g = Guard::new();
        g.input(&p("in.wav"), "an input of this build");
        g.input(&p("clips.csv"), "the manifest");
        g.input(&p("gone.wav"), "an input of this build");
        let e = err(
            &g,
            &[Output::new(p("in.wav"), "the report", Written::Stream)],
        );
        assert!(
            e.contains("the report") && e.contains("overwrite an input"),
            "{e}"
        );
        let e = err(
            &g,
            &[Output::new(p("clips.csv"), "the report", Written::Stream)],
        );
        assert!(e.contains("overwrite the manifest"), "{e}");
        // Another name of the same file is the same file.
        let e = err(&g, &[Output::new(p("alias.h5"), "split x", Written::File)]);
        assert!(e.contains("in.wav"), "{e}");
        // Two outputs at one path, spelled differently, not existing yet.
        let e = err(
            &g,
            &[
                Output::new(p("o/a.h5"), "split a", Written::File),
                Output::new(
                    t.path().join("o/../o/./a.h5"),
                    "the report",
                    Written::Stream,
                ),
            ],
        );
        assert!(e.contains("also split a"), "{e}");
        // A FIFO or a device takes a stream, never a file replaced by rename.
        mkfifo(&p("fifo"));
        g.check(&[Output::new(p("fifo"), "the report", Written::Stream)])
            .unwrap();
        if let Some(null) = crate::test_devices::char_device(t.path(), "null", 1, 3) {
            g.check(&[Output::new(&null, "the report", Written::Stream)])
                .unwrap();
            let e = err(&g, &[Output::new(&null, "split x", Written::File)]);
            assert!(e.contains("a character device is there"), "{e}");
        }
        let e = err(&g, &[Output::new(p("fifo"), "split x", Written::File)]);
        assert!(e.contains("a FIFO is there"), "{e}");
        let e = err(&g, &[Output::new(t.path(), "the report", Written::Stream)]);
        assert!(e.contains("a folder is there"), "{e}");
        let e = err(&g, &[Output::new(p("in.wav"), "split x", Written::Folder)]);
        assert!(e.contains("overwrite an input"), "{e}");
        // A folder replaced whole must not hold an input.
        std::fs::create_dir_all(p("x.npy.d")).unwrap();
        std::fs::hard_link(p("in.wav"), p("x.npy.d/in.wav")).unwrap();
        let e = err(&g, &[Output::new(p("x.npy.d"), "split x", Written::Folder)]);
        assert!(e.contains("replaced whole") && e.contains("in.wav"), "{e}");
        std::fs::remove_file(p("x.npy.d/in.wav")).unwrap();
        // Nor any folder: melctl's folders hold only files.
        std::fs::create_dir_all(p("x.npy.d/deep")).unwrap();
        let e = err(&g, &[Output::new(p("x.npy.d"), "split x", Written::Folder)]);
        assert!(e.contains("holds the folder") && e.contains("deep"), "{e}");
        // Nothing goes inside a folder that is replaced whole.
        let e = err(
            &g,
            &[
                Output::new(p("o/x.npy.d"), "split x", Written::Folder),
                Output::new(p("o/x.npy.d/r.json"), "the report", Written::Stream),
            ],
        );
        assert!(e.contains("inside split x"), "{e}");
        // A report whose folder does not exist is found now.
        let e = err(
            &g,
            &[Output::new(p("no/r.json"), "the report", Written::Stream)],
        );
        assert!(e.contains("cannot write the report there"), "{e}");
        // What is fine is fine.
        g.check(&[
            Output::new(p("o/a.h5"), "split a", Written::File),
            Output::new(p("r.json"), "the report", Written::Stream),
        ])
        .unwrap();
    }
}
