/// The AppleSimulator module. See README.md, "Architecture".
public enum AppleSimulatorModule {}
