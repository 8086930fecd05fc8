//! One build request, prepared once: what `melctl build` and Python's `melctl.build` both
//! hand over. [`BuildRequest::prepare`] makes every decision a build needs before any
//! work (the plan, the dataset and its split names, the shard's part and folder, the
//! cache folder, the memory check, the output guard), so that a front end is words and
//! exit codes around [`PreparedBuild::run`], and a melkit user building in-process gets
//! every check the command line gets.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use mel_audio::{Dataset, GroupPattern, Grouping, ManifestOptions};
use mel_core::config::{BackendKind, LoaderKind};
use mel_core::outputs::{Guard, Output, Written};
use mel_core::{Config, MelPlan};

use super::shard::{SHARD_RECORD, SHARD_REPORT, Shard, ShardOutcome};
use super::{Build, BuildReport, BuildSettings, Error, Observer, OnError, Result};

/// Where a build's files are listed.
#[derive(Debug, Clone, PartialEq)]
pub enum Source {
    /// A folder `ROOT/{split}/{class}/*` (or `ROOT/{class}/*`: one split `all`, unless
    /// [`Splitting`] asks for ratios or groups).
    Folder(PathBuf),
    /// A manifest (CSV or JSONL): `path`, `label`, an optional `split`, and metadata
    /// columns; where it names no split, its rows are split by [`Splitting`].
    Manifest(PathBuf),
}

/// How files are put into splits beyond what the source names, and which clips must
/// share one: ratios drawn by a seeded hash of each clip's group (or path), for a
/// manifest without a `split` column or a `ROOT/{class}` folder; groups from a manifest
/// column or a pattern over the paths (a source that names its splits is checked to
/// hold each group in one).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Splitting {
    /// Split names and their shares, in order (default: training 0.7, validation 0.2,
    /// testing 0.1).
    pub ratios: Option<Vec<(String, f64)>>,
    /// The draw's seed (default 0).
    pub seed: Option<u64>,
    /// A manifest column whose value is each clip's group (`--group-by`).
    pub group_by: Option<String>,
    /// A regular expression whose first capture in each clip's path is its group
    /// (`--group-pattern`), stored as the column `group`.
    pub group_pattern: Option<String>,
}

impl Splitting {
    /// The grouping asked for, checked: one of a column and a pattern, the pattern a
    /// regular expression with a capture group.
    fn grouping(&self) -> Result<Option<Grouping>> {
        match (&self.group_by, &self.group_pattern) {
            (Some(_), Some(_)) => Err(mel_core::Error::config(
                "group_by",
                "give a column or a pattern (group_pattern), not both",
            )
            .into()),
            (Some(c), None) => Ok(Some(Grouping::Column(c.clone()))),
            (None, Some(p)) => GroupPattern::new(p)
                .map(|p| Some(Grouping::Pattern(p)))
                .map_err(|why| {
                    mel_core::Error::config("group_pattern", format!("{p:?}: {why}")).into()
                }),
            (None, None) => Ok(None),
        }
    }
}

impl Source {
    /// The folder or manifest named.
    pub fn path(&self) -> &Path {
        match self {
            Source::Folder(p) | Source::Manifest(p) => p,
        }
    }

    /// Lists the dataset, split by `splitting`, its label ids fixed by `labels` when given.
    fn load(&self, labels: Option<&Labels>, splitting: &Splitting) -> Result<Dataset> {
        let names = labels.map(Labels::names).transpose()?;
        let group = splitting.grouping()?;
        match self {
            Source::Folder(root) => {
                let group = match group {
                    Some(Grouping::Column(_)) => {
                        return Err(mel_core::Error::config(
                            "group_by",
                            "a folder has no columns; its clips' groups come from their paths (group_pattern)",
                        )
                        .into());
                    }
                    Some(Grouping::Pattern(p)) => Some(p),
                    None => None,
                };
                let opts = mel_audio::FolderOptions {
                    ratios: splitting.ratios.clone(),
                    seed: splitting.seed,
                    group,
                };
                let mut dataset = mel_audio::scan_with(root, &opts)?;
                if let Some(names) = names {
                    dataset.relabel(names).map_err(|e| match (labels, e) {
                        // A file's classes are named with the file.
                        (Some(Labels::File(p)), mel_core::Error::Config { message, .. }) => {
                            mel_core::Error::config(format!("label map {}", p.display()), message)
                        }
                        (_, e) => e,
                    })?;
                }
                Ok(dataset)
            }
            Source::Manifest(path) => {
                let defaults = ManifestOptions::default();
                let opts = ManifestOptions {
                    ratios_given: splitting.ratios.is_some() || splitting.seed.is_some(),
                    ratios: splitting.ratios.clone().unwrap_or(defaults.ratios),
                    seed: splitting.seed.unwrap_or(0),
                    label_map: names,
                    group,
                };
                Ok(mel_audio::from_manifest(path, &opts)?)
            }
        }
    }
}

/// The class names, in label-id order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Labels {
    /// Given as a list.
    Names(Vec<String>),
    /// A label-map file, one name per line.
    File(PathBuf),
}

impl Labels {
    fn names(&self) -> Result<Vec<String>> {
        match self {
            Labels::Names(n) => Ok(n.clone()),
            Labels::File(path) => Ok(mel_audio::read_label_map(path)?),
        }
    }
}

/// What a build needs to know of the machine and the user it runs for, read by the
/// front end (the library reads no environment of its own accord).
#[derive(Debug, Clone, Default)]
pub struct Host {
    /// `XDG_CACHE_HOME`, for the default cache folder.
    pub xdg_cache_home: Option<OsString>,
    /// `HOME`, for the default cache folder.
    pub home: Option<OsString>,
    /// Memory available to the build, in bytes (`None`: unknown, not checked).
    pub available_memory: Option<u64>,
}

impl Host {
    /// The host as the front end sees it: `XDG_CACHE_HOME` and `HOME` read through `env`
    /// (the front end's environment: the library reads none), and the memory the system
    /// says is available now.
    pub fn with_env(env: impl Fn(&str) -> Option<OsString>) -> Host {
        Host {
            xdg_cache_home: env("XDG_CACHE_HOME"),
            home: env("HOME"),
            available_memory: mel_loaders::select::available_memory(),
        }
    }
}

/// A build as a front end asks for it: what to read, where to write, how, and on which
/// host. Every field is checked by [`prepare`](Self::prepare).
#[derive(Debug, Clone)]
pub struct BuildRequest {
    /// The folder or manifest.
    pub source: Source,
    /// Split ratios, seed and groups.
    pub splitting: Splitting,
    /// Label ids fixed by a list or a label-map file; `None`: classes in sorted order.
    pub labels: Option<Labels>,
    /// The output folder (a shard writes into `OUTPUT/shards/K-of-N/`).
    pub output: PathBuf,
    /// The spectrogram, run and output configuration, resolved.
    pub config: Config,
    /// The configuration file it came from, if any (protected from being overwritten).
    pub config_file: Option<PathBuf>,
    /// Skip or stop at a file that cannot be decoded.
    pub on_error: OnError,
    /// Splits to build; empty: all.
    pub only: Vec<String>,
    /// Journal finished batches and continue an interrupted build.
    pub resume: bool,
    /// Build only this shard of every split.
    pub shard: Option<Shard>,
    /// The decoded-audio cache folder; `None`: `run.cache_dir`, else the host's default.
    pub cache_dir: Option<PathBuf>,
    /// A report file the front end writes after the build (guarded like an output).
    pub report: Option<PathBuf>,
    /// The machine's facts.
    pub host: Host,
}

impl BuildRequest {
    /// A request to build `source` into `output` with `config`: skip bad files, every
    /// split, no resume, no shard, on a host that is not consulted (no memory check, the
    /// cache under the system's temporary folder).
    pub fn new(source: Source, output: impl Into<PathBuf>, config: Config) -> Self {
        BuildRequest {
            source,
            splitting: Splitting::default(),
            labels: None,
            output: output.into(),
            config,
            config_file: None,
            on_error: OnError::Skip,
            only: Vec::new(),
            resume: false,
            shard: None,
            cache_dir: None,
            report: None,
            host: Host::default(),
        }
    }

    /// Checks the request and lists the dataset, once: the configuration (a mel plan,
    /// options that contradict each other), the memory its buffers take, the split names
    /// and the shard, the cache folder, and every path the build will write against every
    /// input (audio, manifest, configuration, label map) and every file of another kind.
    /// Device discovery for an automatic backend runs meanwhile.
    pub fn prepare(self) -> Result<PreparedBuild> {
        let config = &self.config;
        let plan = MelPlan::from_config(config)?;
        if config.run.backend == BackendKind::Cpu && config.run.device.is_some() {
            return Err(mel_core::Error::config(
                "run.device",
                "a device picks a GPU; the cpu backend uses none (drop one of them)",
            )
            .into());
        }
        if let Some(available) = self.host.available_memory {
            mel_core::pipeline::check_memory(config, &plan, available)?;
        }
        if self.resume && plan.cutting().is_some() {
            let field = match plan.whole() {
                Some(_) => "audio.length",
                None => "audio.windows",
            };
            return Err(mel_core::Error::config(
                field,
                "(whole clips, windows) does not resume an interrupted build yet; build again without resuming",
            )
            .into());
        }
        if let Some(shard) = self.shard
            && !self.only.is_empty()
        {
            return Err(Error::ShardOfSomeSplits { shard });
        }
        let prewarm = crate::backend::prewarm(config.run.backend);
        let whole = self.source.load(self.labels.as_ref(), &self.splitting)?;
        super::check_split_names(&whole, &self.only)?;
        let part = self.shard.map(|s| s.part(&whole));
        let cache_dir = self.cache_folder()?;
        let settings = BuildSettings {
            config: self.config.clone(),
            on_error: self.on_error,
            only: self.only.clone(),
            resume: self.resume,
            cache_dir,
        };
        let out_dir = self
            .shard
            .map_or(self.output.clone(), |s| s.dir(&self.output));
        let prepared = PreparedBuild {
            build: BuildParts {
                settings,
                plan,
                whole,
                part,
            },
            request: self,
            out_dir,
            _prewarm: prewarm,
        };
        prepared.check_outputs()?;
        let (build, available) = (prepared.builder(), prepared.request.host.available_memory);
        super::loaders::check_preloads(&build.settings().config, build.splits(), available)?;
        drop(build);
        Ok(prepared)
    }

    /// The cache folder the memmap loader may use: the request's, the configuration's,
    /// else the host's default; `None` where the loader never caches.
    fn cache_folder(&self) -> Result<Option<PathBuf>> {
        if !matches!(
            self.config.run.loader,
            LoaderKind::Auto | LoaderKind::Memmap
        ) {
            return Ok(None);
        }
        if let Some(d) = &self.cache_dir {
            if d.as_os_str().is_empty() {
                return Err(mel_core::Error::config("run.cache_dir", "an empty path").into());
            }
            return Ok(Some(d.clone()));
        }
        if !self.config.run.cache_dir.is_empty() {
            return Ok(Some(PathBuf::from(&self.config.run.cache_dir)));
        }
        let host = &self.host;
        Ok(Some(super::default_cache_dir(
            host.xdg_cache_home.as_deref(),
            host.home.as_deref(),
        )?))
    }
}

/// The datasets and settings a prepared build runs with.
#[derive(Debug)]
struct BuildParts {
    settings: BuildSettings,
    plan: MelPlan,
    /// The whole dataset (a shard keeps its label map).
    whole: Dataset,
    /// A shard's part of it.
    part: Option<Dataset>,
}

/// A request checked and its dataset listed: ready to [`run`](Self::run).
#[derive(Debug)]
pub struct PreparedBuild {
    request: BuildRequest,
    build: BuildParts,
    out_dir: PathBuf,
    _prewarm: crate::backend::Prewarm,
}

impl PreparedBuild {
    /// The request it was prepared from.
    pub fn request(&self) -> &BuildRequest {
        &self.request
    }

    /// The whole dataset listed.
    pub fn dataset(&self) -> &Dataset {
        &self.build.whole
    }

    /// What this build reads: the whole dataset, or a shard's part of it.
    pub fn tree(&self) -> &Dataset {
        self.build.part.as_ref().unwrap_or(&self.build.whole)
    }

    /// The settings, resolved.
    pub fn settings(&self) -> &BuildSettings {
        &self.build.settings
    }

    /// The mel plan every split is computed with.
    pub fn plan(&self) -> &MelPlan {
        &self.build.plan
    }

    /// The folder the build writes into (a shard's own folder for a shard).
    pub fn out_dir(&self) -> &Path {
        &self.out_dir
    }

    /// The dataset's splits this build writes, and the shard's part of them.
    pub fn chosen_tree(&self) -> Dataset {
        let mut tree = self.tree().clone();
        let settings = &self.build.settings;
        tree.splits.retain(|s| settings.builds(&s.name));
        tree
    }

    /// The manifest the dataset was listed from, if one.
    fn manifest(&self) -> Option<&Path> {
        match &self.request.source {
            Source::Manifest(path) => Some(path),
            Source::Folder(_) => None,
        }
    }

    /// The build of [`tree`](Self::tree).
    fn builder(&self) -> Build<'_> {
        let build = Build::prepared(
            self.tree(),
            self.build.settings.clone(),
            self.build.plan.clone(),
        );
        if self.request.shard.is_some() {
            build.of_a_shard()
        } else {
            build
        }
    }

    /// The loader each split would get and why, without building any.
    pub fn loader_choices(&self) -> Result<Vec<(String, String)>> {
        self.builder().loader_choices()
    }

    /// Every path the build writes, checked against every input and every file of
    /// another kind.
    fn check_outputs(&self) -> Result<()> {
        let request = &self.request;
        let mut guard = Guard::new();
        // Every audio file of the whole tree: a shard must not write over another's input.
        super::outputs::protect_inputs(&mut guard, &self.build.whole);
        if let Source::Manifest(path) = &request.source {
            guard.input(path, "the manifest");
        }
        if let Some(p) = &request.config_file {
            guard.input(p, "the configuration file");
        }
        if let Some(Labels::File(p)) = &request.labels {
            guard.input(p, "the label map");
        }
        let mut outputs = self.builder().planned_outputs(&self.out_dir);
        if request.shard.is_some() {
            let dir = &self.out_dir;
            outputs.push(Output::new(
                dir.join(SHARD_RECORD),
                "the shard record",
                Written::File,
            ));
            outputs.push(Output::new(
                dir.join(SHARD_REPORT),
                "the shard's report",
                Written::File,
            ));
        }
        if let Some(path) = &request.report {
            outputs.push(Output::new(path, "the report", Written::Stream));
        }
        guard.check(&outputs)?;
        Ok(())
    }

    /// Builds it, filling `report` as it goes: every split published only when all have
    /// succeeded (a shard into its own folder, then its record). Raising `cancel` stops
    /// it before its publish. A shard complete and verified already is left as it is.
    pub fn run(
        &self,
        observer: &dyn Observer,
        cancel: &Arc<AtomicBool>,
        report: &mut BuildReport,
    ) -> Result<ShardOutcome> {
        let out = &self.request.output;
        match self.request.shard {
            Some(shard) => super::shard::run_shard(
                (&self.build.whole, self.manifest()),
                &self.builder(),
                shard,
                out,
                observer,
                cancel,
                report,
            ),
            None => self
                .builder()
                .run(out, observer, cancel, report)
                .map(|()| ShardOutcome::Built),
        }
    }

    /// The build's report as JSON, the same from every front end: `report`, the resolved
    /// configuration, `error` (the failure, in the front end's words) and, for a shard,
    /// which one and what this run did.
    pub fn report_json(
        &self,
        report: &BuildReport,
        outcome: Option<&ShardOutcome>,
        error: Option<&str>,
    ) -> serde_json::Value {
        let config = self.build.settings.config.resolved_json();
        let mut json = report.to_json(&config, error);
        if let (Some(shard), Some(outcome)) = (self.request.shard, outcome) {
            json["shard"] = super::shard::report_json(shard, &self.out_dir, outcome);
        }
        json
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use mel_core::Preset;

    /// `n` one-second tones at 4096 Hz under `root/training/{a,b}/`.
    fn tree(root: &Path, n: usize) {
        let spec = hound::WavSpec {
            channels: 1,
            sample_rate: 4096,
            bits_per_sample: 16,
            sample_format: hound::SampleFormat::Int,
        };
        for i in 0..n {
            let dir = root.join("training").join(["a", "b"][i % 2]);
            std::fs::create_dir_all(&dir).unwrap();
            let mut w = hound::WavWriter::create(dir.join(format!("{i}.wav")), spec).unwrap();
            for t in 0..4096 {
                let x = (t as f64 * (0.05 + i as f64 * 0.01)).sin() * 8000.0;
                w.write_sample(x as i16).unwrap();
            }
            w.finalize().unwrap();
        }
    }

    fn request(root: &Path) -> BuildRequest {
        let mut config = Preset::Leak4k.config();
        config.run.loader = LoaderKind::Stream;
        config.run.backend = BackendKind::Cpu;
        BuildRequest::new(Source::Folder(root.join("data")), root.join("out"), config)
    }

    fn refusal(request: BuildRequest) -> String {
        match request.prepare() {
            Ok(_) => panic!("prepared"),
            Err(e) => e.to_string(),
        }
    }

    #[test]
    fn an_in_process_build_gets_the_memory_check_of_the_command_line() {
        let t = tempfile::tempdir().unwrap();
        tree(&t.path().join("data"), 2);
        let mut r = request(t.path());
        r.config.run.batch_clips = 4096;
        r.host.available_memory = Some(64 << 20);
        let e = refusal(r.clone());
        assert!(e.contains("run.batch_clips"), "{e}");
        r.host.available_memory = None;
        r.prepare().unwrap();
    }

    #[test]
    fn an_in_process_build_gets_the_preload_check_of_the_command_line() {
        let t = tempfile::tempdir().unwrap();
        tree(&t.path().join("data"), 40);
        let mut r = request(t.path());
        r.config.run.loader = LoaderKind::Preload;
        r.config.run.batch_clips = 1;
        r.config.run.queue_depth = 1;
        // 40 clips of 40960 samples: 6.6 MB of decoded audio, over half of 8 MB.
        r.host.available_memory = Some(8 << 20);
        let e = refusal(r.clone());
        assert!(e.contains("split training") && e.contains("preload"), "{e}");
        r.host.available_memory = Some(1 << 30);
        r.prepare().unwrap();
    }

    #[test]
    fn an_in_process_build_gets_the_output_guard_of_the_command_line() {
        let t = tempfile::tempdir().unwrap();
        let data = t.path().join("data");
        tree(&data, 2);
        let input = data.join("training/a/0.wav");
        let before = std::fs::read(&input).unwrap();
        let mut r = request(t.path());
        r.report = Some(input.clone());
        let e = refusal(r);
        assert!(e.contains("the report") && e.contains("input"), "{e}");
        assert_eq!(std::fs::read(&input).unwrap(), before);
        // Someone's folder where the split's file goes.
        std::fs::create_dir_all(t.path().join("out/training.h5/mine")).unwrap();
        let e = refusal(request(t.path()));
        assert!(e.contains("training.h5"), "{e}");
        assert!(t.path().join("out/training.h5/mine").is_dir());
        // A label map is an input too.
        std::fs::remove_dir_all(t.path().join("out")).unwrap();
        std::fs::create_dir_all(t.path().join("out")).unwrap();
        let map = t.path().join("out/training.h5");
        std::fs::write(&map, "a\nb\n").unwrap();
        let mut r = request(t.path());
        r.labels = Some(Labels::File(map.clone()));
        let e = refusal(r);
        assert!(e.contains("the label map"), "{e}");
        assert_eq!(std::fs::read_to_string(&map).unwrap(), "a\nb\n");
    }

    #[test]
    fn a_shard_of_some_splits_and_a_device_for_the_cpu_are_refused_before_the_scan() {
        let t = tempfile::tempdir().unwrap();
        // No dataset at all: refused before it is read.
        let mut r = request(t.path());
        r.shard = Some(Shard::new(0, 2).unwrap());
        r.only = vec!["training".into()];
        assert!(matches!(r.prepare(), Err(Error::ShardOfSomeSplits { .. })));
        let mut r = request(t.path());
        r.config.run.device = Some(mel_core::config::DeviceSelector::Index(0));
        assert!(refusal(r).contains("run.device"));
    }

    #[test]
    fn a_split_the_dataset_lacks_is_refused_naming_those_it_has() {
        let t = tempfile::tempdir().unwrap();
        tree(&t.path().join("data"), 2);
        let mut r = request(t.path());
        r.only = vec!["nope".into()];
        let e = refusal(r);
        assert!(e.contains("\"nope\"") && e.contains("training"), "{e}");
    }

    #[test]
    fn a_prepared_shard_writes_into_its_folder_and_reports_it() {
        let t = tempfile::tempdir().unwrap();
        tree(&t.path().join("data"), 6);
        let mut r = request(t.path());
        r.shard = Some(Shard::new(1, 3).unwrap());
        let prepared = r.prepare().unwrap();
        assert_eq!(prepared.out_dir(), t.path().join("out/shards/1-of-3"));
        assert_eq!(prepared.tree().splits[0].files.len(), 2);
        assert_eq!(prepared.dataset().splits[0].files.len(), 6);
        let mut report = BuildReport::default();
        let cancel = Arc::new(AtomicBool::new(false));
        let outcome = prepared
            .run(&super::super::NoObserver, &cancel, &mut report)
            .unwrap();
        assert_eq!(outcome, ShardOutcome::Built);
        assert!(t.path().join("out/shards/1-of-3/training.h5").is_file());
        let json = prepared.report_json(&report, Some(&outcome), None);
        assert_eq!(json["shard"]["index"], 1);
        assert_eq!(json["splits"][0]["clips"], 2);
        let again = prepared
            .run(
                &super::super::NoObserver,
                &cancel,
                &mut BuildReport::default(),
            )
            .unwrap();
        assert!(matches!(again, ShardOutcome::AlreadyComplete { .. }));
    }
}
