package rocketstore.spark;

/** A failure of the rocketstore JVM reader; the message is the engine's, with its causes. */
public class RocketStoreException extends RuntimeException {
    private static final long serialVersionUID = 1L;

    public RocketStoreException(String message) {
        super(message);
    }
}
