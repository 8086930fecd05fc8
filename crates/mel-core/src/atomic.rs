//! Atomic outputs: everything melctl writes is built under a temporary name beside its
//! final path (`.NAME.partial-PID-XXXXXX`, created by `tempfile`, so two writers never
//! share one) and renamed into place only when complete. An uncommitted staging file or
//! folder is removed when dropped; one a killed process left behind is removed by the
//! next run ([`remove_stale_partials`]).
//!
//! Commit order, with `durable`: the content is flushed (`fsync`), then renamed, then
//! the folder is flushed, so after a power loss the final path holds the old or the new
//! output, never a mix. Without `durable` a killed process still never leaves a partial
//! output at the final path.

use std::fs::File;
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};

/// A file or folder being built for `final_path`.
#[derive(Debug)]
pub struct Staged {
    temp: Temp,
    final_path: PathBuf,
}

#[derive(Debug)]
enum Temp {
    File(tempfile::TempPath),
    Dir(tempfile::TempDir),
}

fn parent(path: &Path) -> &Path {
    match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    }
}

/// Permissions of an output as any file the user creates (the process's umask applies),
/// not tempfile's private 0600.
fn mode(bits: u32) -> std::fs::Permissions {
    use std::os::unix::fs::PermissionsExt;
    std::fs::Permissions::from_mode(bits)
}

fn prefix(final_path: &Path) -> String {
    let name = final_path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    format!(".{name}.partial-{}-", std::process::id())
}

impl Staged {
    /// A new empty temporary file beside `final_path`, and its open handle.
    pub fn file(final_path: &Path) -> Result<(Staged, File)> {
        let dir = parent(final_path);
        let named = tempfile::Builder::new()
            .prefix(&prefix(final_path))
            .permissions(mode(0o666))
            .tempfile_in(dir)
            .map_err(|e| Error::io(dir, e))?;
        let (file, path) = named.into_parts();
        Ok((
            Staged {
                temp: Temp::File(path),
                final_path: final_path.to_path_buf(),
            },
            file,
        ))
    }

    /// A new empty temporary folder beside `final_path`.
    pub fn dir(final_path: &Path) -> Result<Staged> {
        let dir = parent(final_path);
        let temp = tempfile::Builder::new()
            .prefix(&prefix(final_path))
            .permissions(mode(0o777))
            .tempdir_in(dir)
            .map_err(|e| Error::io(dir, e))?;
        Ok(Staged {
            temp: Temp::Dir(temp),
            final_path: final_path.to_path_buf(),
        })
    }

    /// Where the output is being built.
    pub fn path(&self) -> &Path {
        match &self.temp {
            Temp::File(p) => p,
            Temp::Dir(d) => d.path(),
        }
    }

    /// Where it goes on commit.
    pub fn final_path(&self) -> &Path {
        &self.final_path
    }

    /// Moves the finished output to its final path (replacing what was there), flushing
    /// it and the folder first and after when `durable`. The caller must have closed
    /// every handle that could still write to it.
    pub fn commit(self, durable: bool) -> Result<PathBuf> {
        let final_path = self.final_path.clone();
        let io = |p: &Path, e| Error::io(p, e);
        match self.temp {
            Temp::File(temp) => {
                if durable {
                    File::open(&temp)
                        .and_then(|f| f.sync_all())
                        .map_err(|e| io(&temp, e))?;
                }
                temp.persist(&final_path)
                    .map_err(|e| io(&final_path, e.error))?;
            }
            Temp::Dir(temp) => {
                if durable {
                    sync_tree(temp.path()).map_err(|e| io(temp.path(), e))?;
                }
                let staged = temp.keep();
                if let Err(e) = replace_dir(&staged, &final_path) {
                    let _ = std::fs::remove_dir_all(&staged);
                    return Err(io(&final_path, e));
                }
            }
        }
        if durable {
            File::open(parent(&final_path))
                .and_then(|d| d.sync_all())
                .map_err(|e| io(parent(&final_path), e))?;
        }
        Ok(final_path)
    }
}

/// Flushes every file of a folder (one level) and the folder itself.
fn sync_tree(dir: &Path) -> std::io::Result<()> {
    for e in std::fs::read_dir(dir)? {
        let p = e?.path();
        if p.is_file() {
            File::open(&p)?.sync_all()?;
        }
    }
    File::open(dir)?.sync_all()
}

/// Puts the folder `staged` at `final_path`: a plain rename when nothing is there; else
/// an atomic exchange (Linux `renameat2(RENAME_EXCHANGE)`) and the old folder removed, so
/// the final path always holds one complete output.
fn replace_dir(staged: &Path, final_path: &Path) -> std::io::Result<()> {
    if !final_path.exists() {
        return std::fs::rename(staged, final_path);
    }
    exchange(staged, final_path)?;
    // `staged` now holds the previous output.
    std::fs::remove_dir_all(staged)
}

#[cfg(target_os = "linux")]
fn exchange(a: &Path, b: &Path) -> std::io::Result<()> {
    use std::ffi::CString;
    use std::os::unix::ffi::OsStrExt;
    let ca = CString::new(a.as_os_str().as_bytes()).map_err(std::io::Error::other)?;
    let cb = CString::new(b.as_os_str().as_bytes()).map_err(std::io::Error::other)?;
    // SAFETY: two valid NUL-terminated paths; renameat2 only reads them.
    let r = unsafe {
        libc::renameat2(
            libc::AT_FDCWD,
            ca.as_ptr(),
            libc::AT_FDCWD,
            cb.as_ptr(),
            libc::RENAME_EXCHANGE,
        )
    };
    if r == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

#[cfg(not(target_os = "linux"))]
fn exchange(a: &Path, b: &Path) -> std::io::Result<()> {
    // No atomic exchange: move the old folder aside, then the new one in.
    let aside = b.with_extension("old");
    std::fs::rename(b, &aside)?;
    std::fs::rename(a, b)?;
    std::fs::rename(&aside, a)
}

/// Removes what killed runs left beside `final_path`: `.NAME.partial-PID-…` files or
/// folders whose process no longer exists. Returns how many were removed.
pub fn remove_stale_partials(final_path: &Path) -> usize {
    let Some(name) = final_path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
    else {
        return 0;
    };
    let stem = format!(".{name}.partial-");
    let Ok(entries) = std::fs::read_dir(parent(final_path)) else {
        return 0;
    };
    let mut removed = 0;
    for e in entries.flatten() {
        let file = e.file_name().to_string_lossy().into_owned();
        let Some(pid) = file.strip_prefix(&stem).and_then(|rest| {
            let digits = rest.split('-').next().unwrap_or("");
            digits.parse::<u32>().ok()
        }) else {
            continue;
        };
        if !process_alive(pid) {
            let p = e.path();
            let ok = if p.is_dir() {
                std::fs::remove_dir_all(&p)
            } else {
                std::fs::remove_file(&p)
            };
            removed += usize::from(ok.is_ok());
        }
    }
    removed
}

/// An exclusive advisory lock (`flock`) on a folder, held until dropped. Two melctl
/// processes writing the same output folder, or building the same cache, would otherwise
/// interleave their work.
#[derive(Debug)]
pub struct DirLock {
    _file: File,
}

impl DirLock {
    /// Waits until the lock on `dir` is free, then takes it.
    pub fn wait(dir: &Path) -> Result<DirLock> {
        let f = File::open(dir).map_err(|e| Error::io(dir, e))?;
        f.lock().map_err(|e| Error::io(dir, e))?;
        Ok(DirLock { _file: f })
    }

    /// Takes the lock on `dir` now, or fails naming the process that holds it.
    pub fn try_now(dir: &Path) -> Result<DirLock> {
        let f = File::open(dir).map_err(|e| Error::io(dir, e))?;
        match f.try_lock() {
            Ok(()) => Ok(DirLock { _file: f }),
            Err(std::fs::TryLockError::WouldBlock) => {
                let holder = lock_holder(dir)
                    .map(|pid| format!("process {pid}"))
                    .unwrap_or_else(|| "another process".into());
                Err(Error::output(
                    dir,
                    format!(
                        "{holder} is writing to this folder (it holds its lock); wait for it to finish, or write elsewhere"
                    ),
                ))
            }
            Err(std::fs::TryLockError::Error(e)) => Err(Error::io(dir, e)),
        }
    }
}

/// The process holding a `flock` on `path`, from Linux's `/proc/locks`.
fn lock_holder(path: &Path) -> Option<u32> {
    use std::os::unix::fs::MetadataExt;
    let m = std::fs::metadata(path).ok()?;
    let ino = m.ino().to_string();
    let locks = std::fs::read_to_string("/proc/locks").ok()?;
    locks.lines().find_map(|l| {
        // "1: FLOCK  ADVISORY  WRITE 12345 08:01:123456 0 EOF"
        let f: Vec<&str> = l.split_whitespace().collect();
        let (pid, dev_ino) = (f.get(4)?, f.get(5)?);
        (f.get(1) == Some(&"FLOCK") && dev_ino.rsplit(':').next() == Some(ino.as_str()))
            .then(|| pid.parse().ok())
            .flatten()
    })
}

/// Whether a process with this id exists (this one always does).
pub fn process_alive(pid: u32) -> bool {
    pid == std::process::id() || Path::new(&format!("/proc/{pid}")).exists()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn a_file_appears_only_on_commit_and_a_dropped_one_leaves_nothing() {
        let t = tempfile::tempdir().unwrap();
        let fin = t.path().join("out.h5");
        let (staged, mut f) = Staged::file(&fin).unwrap();
        f.write_all(b"new").unwrap();
        drop(f);
        assert!(!fin.exists());
        let name = staged
            .path()
            .file_name()
            .unwrap()
            .to_string_lossy()
            .into_owned();
        assert!(name.starts_with(".out.h5.partial-"), "{name}");
        assert_eq!(staged.commit(true).unwrap(), fin);
        assert_eq!(std::fs::read(&fin).unwrap(), b"new");
        // Ordinary permissions (the umask's), not a private temporary file's 0600.
        use std::os::unix::fs::PermissionsExt;
        let m = std::fs::metadata(&fin).unwrap().permissions().mode() & 0o777;
        assert_eq!(m, 0o666 & !umask(), "{m:o}");
        let (staged, _f) = Staged::file(&fin).unwrap();
        let temp = staged.path().to_path_buf();
        drop(staged);
        assert!(!temp.exists());
        assert_eq!(std::fs::read_dir(t.path()).unwrap().count(), 1);
    }

    /// This process's umask, as Linux reports it (reading it never changes it).
    fn umask() -> u32 {
        let status = std::fs::read_to_string("/proc/self/status").unwrap();
        let line = status.lines().find(|l| l.starts_with("Umask:")).unwrap();
        u32::from_str_radix(line.split_whitespace().nth(1).unwrap(), 8).unwrap()
    }

    #[test]
    fn a_folder_replaces_the_previous_one_whole() {
        let t = tempfile::tempdir().unwrap();
        let fin = t.path().join("train.npy.d");
        for content in ["old", "new"] {
            let staged = Staged::dir(&fin).unwrap();
            std::fs::write(staged.path().join("x"), content).unwrap();
            staged.commit(false).unwrap();
            assert_eq!(std::fs::read_to_string(fin.join("x")).unwrap(), content);
        }
        assert_eq!(std::fs::read_dir(t.path()).unwrap().count(), 1);
    }

    #[test]
    fn a_second_writer_of_a_folder_is_told_who_holds_it() {
        let t = tempfile::tempdir().unwrap();
        let first = DirLock::try_now(t.path()).unwrap();
        let e = DirLock::try_now(t.path()).unwrap_err().to_string();
        assert!(
            e.contains(&format!("process {}", std::process::id())) && e.contains("writing"),
            "{e}"
        );
        drop(first);
        DirLock::try_now(t.path()).unwrap();
    }

    #[test]
    fn partials_of_dead_processes_are_removed_and_live_ones_kept() {
        let t = tempfile::tempdir().unwrap();
        let fin = t.path().join("a.h5");
        // PIDs above the kernel's maximum (2^22) never exist.
        std::fs::write(t.path().join(".a.h5.partial-99999999-abc"), b"x").unwrap();
        std::fs::create_dir(t.path().join(".a.h5.partial-99999998")).unwrap();
        let (live, _f) = Staged::file(&fin).unwrap();
        assert_eq!(remove_stale_partials(&fin), 2);
        assert!(live.path().exists());
    }
}
