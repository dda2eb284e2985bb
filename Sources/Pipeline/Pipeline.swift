/// The Pipeline module. See README.md, "Architecture".
public enum PipelineModule {}
