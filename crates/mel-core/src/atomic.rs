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
    format!("{}{}-", temp_stem(final_path), std::process::id())
}

/// Names of `final_path`'s temporaries start with this: `.NAME.partial-`, with a NAME
/// longer than 160 bytes cut at 128 and marked by a hash of the whole (a 245-byte report
/// name is valid, but its temporary was past the 255-byte limit of a file name).
fn temp_stem(final_path: &Path) -> String {
    let name = final_path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    if name.len() <= 160 {
        return format!(".{name}.partial-");
    }
    let mut cut = 128;
    while !name.is_char_boundary(cut) {
        cut -= 1;
    }
    let hash = xxhash_rust::xxh3::xxh3_64(name.as_bytes());
    format!(".{}~{hash:016x}.partial-", &name[..cut])
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

    /// Flushes the finished output's data (the file, or every file of the folder) to
    /// the disk, for a caller that publishes several outputs and wants every flush done
    /// before the first rename ([`commit_flushed`](Self::commit_flushed)).
    pub fn flush(&self) -> Result<()> {
        let r = match &self.temp {
            Temp::File(temp) => File::open(temp).and_then(|f| f.sync_all()),
            Temp::Dir(temp) => sync_tree(temp.path()),
        };
        r.map_err(|e| write_failed(&self.final_path, "flushing to the disk", &e))
    }

    /// Moves the output to its final path with no flush: after [`flush`](Self::flush),
    /// the caller flushes the folder once all its renames are done.
    pub fn commit_flushed(self) -> Result<PathBuf> {
        self.commit(false)
    }

    /// Moves the finished output to its final path (replacing what was there), flushing
    /// it and the folder first and after when `durable`. The caller must have closed
    /// every handle that could still write to it.
    ///
    /// Only a regular file (or a link) is ever replaced by a file, and only a folder (or a
    /// link) by a folder: a device, a FIFO or a socket at the final path is an error, so
    /// a rename never turns `/dev/null` into a regular file.
    pub fn commit(self, durable: bool) -> Result<PathBuf> {
        let final_path = self.final_path.clone();
        let io = |_: &Path, e: std::io::Error| write_failed(&final_path, "publishing", &e);
        if let Ok(m) = std::fs::symlink_metadata(&final_path) {
            let kind = m.file_type();
            let fits = kind.is_symlink()
                || match self.temp {
                    Temp::File(_) => kind.is_file(),
                    Temp::Dir(_) => kind.is_dir(),
                };
            if !fits {
                return Err(Error::output(
                    &final_path,
                    format!(
                        "{} is there; melctl replaces only what it writes (a regular file or a folder), so nothing was replaced",
                        crate::input::describe(kind)
                    ),
                ));
            }
        }
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

/// Writes `bytes` to `path`: into an existing FIFO or character device directly (a
/// rename would replace the node with a regular file), anywhere else through a
/// temporary file renamed into place ([`Staged`]). Anything else at the path (a folder, a
/// socket, a block device) is refused.
///
/// A path that names one of this process's own descriptors (`/dev/stdout`, `/dev/fd/2`,
/// `/proc/self/fd/N`, through any links) is written to that descriptor as it is, at its
/// offset: renaming over `/dev/stdout` would replace the system's link with a file.
pub fn write_file(path: &Path, bytes: &[u8], durable: bool) -> Result<()> {
    use std::io::Write;
    use std::os::unix::fs::FileTypeExt;
    if let Some(fd) = own_descriptor(path) {
        // SAFETY: dup of a descriptor number; the copy is owned by the File below.
        let copy = unsafe { libc::dup(fd) };
        if copy < 0 {
            return Err(Error::io(path, std::io::Error::last_os_error()));
        }
        // SAFETY: `copy` is a fresh descriptor nothing else owns.
        let mut f = unsafe { <File as std::os::fd::FromRawFd>::from_raw_fd(copy) };
        return f
            .write_all(bytes)
            .map_err(|e| write_failed(path, "writing", &e));
    }
    if let Ok(m) = std::fs::metadata(path) {
        let kind = m.file_type();
        if kind.is_fifo() || kind.is_char_device() {
            // Opened for writing only, never created or truncated.
            let mut f = std::fs::OpenOptions::new()
                .write(true)
                .open(path)
                .map_err(|e| Error::io(path, e))?;
            return f
                .write_all(bytes)
                .map_err(|e| write_failed(path, "writing", &e));
        }
    }
    let (staged, mut f) = Staged::file(path)?;
    f.write_all(bytes)
        .map_err(|e| write_failed(path, "writing", &e))?;
    drop(f);
    staged.commit(durable)?;
    Ok(())
}

/// The error of a write of `what` into the output `path` that failed with `e`: the
/// output named, the operating system's cause kept, a full disk called one.
pub fn write_failed(path: &Path, what: &str, e: &std::io::Error) -> Error {
    Error::output(path, format!("{what}: {}", os_cause(e)))
}

/// `e` in words, a full disk or an exhausted quota named as such first.
pub fn os_cause(e: &std::io::Error) -> String {
    match e.raw_os_error() {
        Some(libc::ENOSPC) => format!("the disk is full ({e})"),
        Some(libc::EDQUOT) => format!("the disk quota is exhausted ({e})"),
        _ => e.to_string(),
    }
}

/// The descriptor number `path` names when it is one of this process's own
/// (`/dev/stdout`, `/dev/stderr`, `/dev/fd/N`, `/proc/self/fd/N`, `/proc/PID/fd/N` of this
/// process), following links (at most 8); `None` for any other path.
pub fn own_descriptor(path: &Path) -> Option<i32> {
    let own = format!("/proc/{}/fd/", std::process::id());
    let mut p = path.to_path_buf();
    for _ in 0..8 {
        let text = p.to_str()?;
        let n = ["/proc/self/fd/", "/dev/fd/", own.as_str()]
            .iter()
            .find_map(|prefix| text.strip_prefix(prefix));
        if let Some(n) = n {
            return n.parse().ok();
        }
        let target = std::fs::read_link(&p).ok()?;
        p = if target.is_absolute() {
            target
        } else {
            parent(&p).join(target)
        };
    }
    None
}

/// Characters `tempfile` adds after the prefix of a temporary name.
const TEMP_SUFFIX_LEN: usize = 6;

/// The process id in the name of a temporary of `final_path`'s output, or `None` when
/// `name` is not exactly `.NAME.partial-PID-XXXXXX` (so an output whose name merely
/// starts like one, a split called `.x.h5.partial-9-a`, is never taken for one).
fn temp_pid(stem: &str, name: &str) -> Option<u32> {
    let (pid, suffix) = name.strip_prefix(stem)?.split_once('-')?;
    let digits = !pid.is_empty() && pid.bytes().all(|b| b.is_ascii_digit());
    let random =
        suffix.len() == TEMP_SUFFIX_LEN && suffix.bytes().all(|b| b.is_ascii_alphanumeric());
    (digits && random).then(|| pid.parse().ok()).flatten()
}

/// Removes what killed runs left beside `final_path`: `.NAME.partial-PID-XXXXXX` files or
/// folders whose process no longer exists. Returns how many were removed.
pub fn remove_stale_partials(final_path: &Path) -> usize {
    if final_path.file_name().is_none() {
        return 0;
    }
    let stem = temp_stem(final_path);
    let Ok(entries) = std::fs::read_dir(parent(final_path)) else {
        return 0;
    };
    let mut removed = 0;
    for e in entries.flatten() {
        let file = e.file_name().to_string_lossy().into_owned();
        let Some(pid) = temp_pid(&stem, &file) else {
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
    /// The folder's (device, inode), in [`HELD`] while the lock is held.
    id: (u64, u64),
}

/// The folders this process holds locks on: `flock` on a second open of the same folder
/// would wait for this process itself (a cache folder that is the output folder hung the
/// build for ever), so a second lock is refused at once instead.
static HELD: std::sync::Mutex<Vec<(u64, u64)>> = std::sync::Mutex::new(Vec::new());

/// Opens `dir` for locking, refusing a folder this process already holds.
fn open_unheld(dir: &Path) -> Result<(File, (u64, u64))> {
    use std::os::unix::fs::MetadataExt;
    let f = File::open(dir).map_err(|e| Error::io(dir, e))?;
    let m = f.metadata().map_err(|e| Error::io(dir, e))?;
    let id = (m.dev(), m.ino());
    if HELD.lock().unwrap_or_else(|p| p.into_inner()).contains(&id) {
        return Err(Error::output(
            dir,
            "this process already holds this folder's lock (another build running in this process, or the cache folder is the output folder); give each its own folder",
        ));
    }
    Ok((f, id))
}

impl DirLock {
    fn held(file: File, id: (u64, u64)) -> DirLock {
        HELD.lock().unwrap_or_else(|p| p.into_inner()).push(id);
        DirLock { _file: file, id }
    }

    /// Waits until the lock on `dir` is free, then takes it.
    pub fn wait(dir: &Path) -> Result<DirLock> {
        let (f, id) = open_unheld(dir)?;
        f.lock().map_err(|e| Error::io(dir, e))?;
        Ok(DirLock::held(f, id))
    }

    /// Takes the lock on `dir` now, or fails naming the process that holds it.
    pub fn try_now(dir: &Path) -> Result<DirLock> {
        let (f, id) = open_unheld(dir)?;
        match f.try_lock() {
            Ok(()) => Ok(DirLock::held(f, id)),
            Err(std::fs::TryLockError::WouldBlock) => {
                let holder = lock_holder(dir)
                    .map(|pid| format!("process {pid}"))
                    .unwrap_or_else(|| "another process".into());
                Err(Error::output(
                    dir,
                    format!(
                        "{holder} is using this folder (it holds its lock: a build, or a merge reading or writing it); wait for it to finish, or write elsewhere"
                    ),
                ))
            }
            Err(std::fs::TryLockError::Error(e)) => Err(Error::io(dir, e)),
        }
    }
}

impl Drop for DirLock {
    fn drop(&mut self) {
        let mut held = HELD.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(i) = held.iter().position(|&h| h == self.id) {
            held.swap_remove(i);
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
    fn a_folder_this_process_holds_is_refused_not_waited_on() {
        let t = tempfile::tempdir().unwrap();
        let lock = DirLock::try_now(t.path()).unwrap();
        // wait() on a folder this process holds waited for itself for ever.
        let e = DirLock::wait(t.path()).unwrap_err().to_string();
        assert!(
            e.contains("this process already holds this folder's lock"),
            "{e}"
        );
        drop(lock);
        drop(DirLock::wait(t.path()).unwrap());
    }

    #[test]
    fn a_second_writer_of_a_folder_is_told_who_holds_it() {
        let t = tempfile::tempdir().unwrap();
        // Another holder's flock (taken here, outside DirLock, as another process would).
        let first = File::open(t.path()).unwrap();
        first.lock().unwrap();
        let e = DirLock::try_now(t.path()).unwrap_err().to_string();
        assert!(
            e.contains(&format!("process {}", std::process::id())) && e.contains("writing"),
            "{e}"
        );
        drop(first);
        DirLock::try_now(t.path()).unwrap();
    }

    /// Any valid file name can be written atomically: the temporary of a 250-byte name
    /// (`.NAME.partial-PID-XXXXXX` was past the 255-byte limit) is cut and hashed, and a
    /// killed run's leftover of it is still found.
    #[test]
    fn a_name_near_the_file_name_limit_gets_a_short_temporary() {
        let t = tempfile::tempdir().unwrap();
        let long = format!("{}.json", "é".repeat(120) + "r");
        assert!(long.len() > 240 && long.len() <= 255, "{}", long.len());
        let fin = t.path().join(&long);
        write_file(&fin, b"report", false).unwrap();
        assert_eq!(std::fs::read(&fin).unwrap(), b"report");
        let (staged, _f) = Staged::file(&fin).unwrap();
        let temp = staged.path().file_name().unwrap().len();
        assert!(temp <= 255, "{temp}");
        let other = t.path().join(format!("{}x.json", "é".repeat(120) + "r"));
        let (_, _g) = Staged::file(&other).unwrap();
        let leftover = staged.path().to_string_lossy().replace(
            &format!("partial-{}-", std::process::id()),
            "partial-99999999-",
        );
        std::fs::write(&leftover, b"x").unwrap();
        assert_eq!(
            remove_stale_partials(&fin),
            1,
            "the leftover of this name only"
        );
        assert!(!Path::new(&leftover).exists());
    }

    #[test]
    fn partials_of_dead_processes_are_removed_and_live_ones_kept() {
        let t = tempfile::tempdir().unwrap();
        let fin = t.path().join("a.h5");
        // PIDs above the kernel's maximum (2^22) never exist.
        std::fs::write(t.path().join(".a.h5.partial-99999999-abc123"), b"x").unwrap();
        std::fs::create_dir(t.path().join(".a.h5.partial-99999998-XyZ0a9")).unwrap();
        // Outputs whose names only start like a temporary are never removed.
        for name in [
            ".a.h5.partial-99999999-a.h5",
            ".a.h5.partial-99999999-abc123.h5",
            ".a.h5.partial-99999999",
            ".a.h5.partial--abc123",
        ] {
            std::fs::write(t.path().join(name), b"x").unwrap();
        }
        let (live, _f) = Staged::file(&fin).unwrap();
        assert_eq!(remove_stale_partials(&fin), 2);
        assert!(live.path().exists());
        assert_eq!(std::fs::read_dir(t.path()).unwrap().count(), 5);
    }

    #[test]
    fn a_full_disk_is_named_and_the_os_cause_kept() {
        let p = Path::new("out/training.h5");
        let e = write_failed(
            p,
            "writing rows 0..",
            &std::io::Error::from_raw_os_error(28),
        );
        let s = e.to_string();
        assert!(
            s.contains("out/training.h5")
                && s.contains("the disk is full")
                && s.contains("No space left on device"),
            "{s}"
        );
        let q = os_cause(&std::io::Error::from_raw_os_error(libc::EDQUOT));
        assert!(q.contains("quota"), "{q}");
    }

    #[test]
    fn a_device_or_fifo_is_written_directly_and_never_renamed_over() {
        let t = tempfile::tempdir().unwrap();
        let fifo = t.path().join("r.json");
        let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        // SAFETY: a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o644) }, 0);
        let reader = {
            let fifo = fifo.clone();
            std::thread::spawn(move || std::fs::read(fifo).unwrap())
        };
        write_file(&fifo, b"report", false).unwrap();
        assert_eq!(reader.join().unwrap(), b"report");
        // A character device (as /dev/null is), made here: written to, never replaced.
        if let Some(null) = crate::test_devices::char_device(t.path(), "null", 1, 3) {
            write_file(&null, b"x", true).unwrap();
            use std::os::unix::fs::FileTypeExt;
            assert!(
                std::fs::metadata(&null)
                    .unwrap()
                    .file_type()
                    .is_char_device()
            );
        }
        use std::os::unix::fs::FileTypeExt;
        assert!(std::fs::metadata(&fifo).unwrap().file_type().is_fifo());
        // A staged file is never renamed over a FIFO, nor a folder over a file.
        let (staged, _f) = Staged::file(&fifo).unwrap();
        let e = staged.commit(false).unwrap_err().to_string();
        assert!(e.contains("a FIFO is there"), "{e}");
        assert!(std::fs::metadata(&fifo).unwrap().file_type().is_fifo());
        let file = t.path().join("x.npy.d");
        std::fs::write(&file, b"x").unwrap();
        let e = Staged::dir(&file).unwrap().commit(false).unwrap_err();
        assert!(e.to_string().contains("a regular file is there"), "{e}");
        // This process's own descriptors are named, through links too.
        assert_eq!(own_descriptor(Path::new("/dev/stdout")), Some(1));
        assert_eq!(own_descriptor(Path::new("/proc/self/fd/2")), Some(2));
        let link = t.path().join("err");
        std::os::unix::fs::symlink("/dev/stderr", &link).unwrap();
        assert_eq!(own_descriptor(&link), Some(2));
        assert_eq!(own_descriptor(&fifo), None);
        // A regular file is replaced as before.
        let plain = t.path().join("plain.json");
        write_file(&plain, b"one", false).unwrap();
        write_file(&plain, b"two", false).unwrap();
        assert_eq!(std::fs::read(&plain).unwrap(), b"two");
    }
}
