/// The RateLimiter module. See README.md, "Architecture".
public enum RateLimiterModule {}
