package dev.beamkinesis.anchors;

import org.apache.beam.sdk.io.aws2.common.ClientBuilderFactory;
import org.apache.beam.sdk.io.aws2.common.ClientConfiguration;
import org.apache.beam.sdk.io.aws2.options.AwsOptions;
import software.amazon.awssdk.awscore.client.builder.AwsClientBuilder;
import software.amazon.awssdk.core.client.builder.SdkAsyncClientBuilder;
import software.amazon.awssdk.http.Protocol;
import software.amazon.awssdk.http.nio.netty.NettyNioAsyncHttpClient;

/**
 * Beam's default client builders, except that asynchronous clients speak HTTP/1.1: the
 * Kinesis async client defaults to HTTP/2, which the plain-HTTP test server does not speak.
 * KinesisIO's write uses the async client.
 */
public final class Http1ClientBuilderFactory implements ClientBuilderFactory {
  private final ClientBuilderFactory delegate = ClientBuilderFactory.defaultFactory();

  @Override
  public <BuilderT extends AwsClientBuilder<BuilderT, ClientT>, ClientT> BuilderT create(
      BuilderT builder, ClientConfiguration config, AwsOptions options) {
    BuilderT b = delegate.create(builder, config, options);
    if (b instanceof SdkAsyncClientBuilder<?, ?> async) {
      async.httpClientBuilder(NettyNioAsyncHttpClient.builder().protocol(Protocol.HTTP1_1));
    }
    return b;
  }

  @Override
  public void checkConfiguration(ClientConfiguration config, AwsOptions options) {
    delegate.checkConfiguration(config, options);
  }
}
