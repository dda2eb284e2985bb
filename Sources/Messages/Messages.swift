/// The Messages module. See README.md, "Architecture".
public enum MessagesModule {}
