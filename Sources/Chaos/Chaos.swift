/// The multi-process chaos harness of issue 8. (Being built.)
public enum Chaos {}
